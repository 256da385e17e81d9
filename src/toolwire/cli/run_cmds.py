"""`toolwire run | render | parse | undo`: the librarian job from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from toolwire.cli._output import stderr, stdout

__all__ = ["register"]

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB store file [env TOOLWIRE_DB; default data/toolwire.duckdb]"),
]


def run(
    spec: Annotated[Path, typer.Argument(help="Agent spec (YAML).")],
    workspace: Annotated[
        Path | None, typer.Option(help="Notes folder [default: the spec's schedule.workspace]")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Override the model, PROVIDER:NAME [env TOOLWIRE_MODEL]")
    ] = None,
    tooling_transport: Annotated[
        str | None, typer.Option(help="Override the transport [env TOOLWIRE_TRANSPORT]")
    ] = None,
    db: DbOption = None,
    dry_run: Annotated[bool, typer.Option(help="Print the plan as a diff; write no note")] = False,
    commit: Annotated[bool, typer.Option(help="git-commit the changes (workspace in git)")] = False,
    record: Annotated[
        Path | None, typer.Option(help="Write every completion to PATH as a replay script")
    ] = None,
    user: Annotated[str | None, typer.Option(help="User id [env TOOLWIRE_USER]")] = None,
    prefect: Annotated[
        bool, typer.Option(help="Run as a Prefect flow (--no-prefect: plain Python)")
    ] = True,
) -> None:
    """Run an agent spec once (the librarian for xml_attrless specs)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from toolwire.errors import UsageError

    kwargs: dict[str, Any] = dict(
        workspace=str(workspace) if workspace else None,
        db=str(db) if db else None,
        model=model,
        transport=tooling_transport,
        dry_run=dry_run,
        commit=commit,
        record=str(record) if record else None,
        user=user,
    )
    progress = Progress(
        TextColumn("[bold]librarian[/]"), BarColumn(), MofNCompleteColumn(), console=stderr
    )
    task_id = progress.add_task("requests", total=None)

    def on_turn(done: int, total: int) -> None:
        progress.update(task_id, completed=done, total=total)

    if prefect:
        # Spec, pack and workspace errors are the user's to fix: report them in one
        # line before Prefect starts (it would log them as a flow crash, traceback and all).
        from toolwire.librarian.job import load_context

        ctx = load_context(spec, workspace=workspace, model=model, transport=tooling_transport)
        if not ctx.workspace_root.is_dir():
            raise UsageError(f"workspace {ctx.workspace_root} is not a directory")
    with progress:
        if prefect:
            from toolwire.flows import run_librarian_flow

            result = run_librarian_flow(spec, on_turn=on_turn, **kwargs)
        else:
            from toolwire.librarian.job import prepare_run, run_librarian

            ctx = prepare_run(spec, **kwargs)
            try:
                result = run_librarian(ctx, on_turn=on_turn)
            finally:
                ctx.provider.close()
    _print_summary(result, dry_run)
    raise typer.Exit(0 if result.ok else 1)


def _print_summary(result: Any, dry_run: bool) -> None:
    from collections import Counter

    from rich.table import Table

    if dry_run and result.diff:
        stdout.print(result.diff, markup=False, highlight=False)
    table = Table(title=f"run {result.run_id}", show_lines=False)
    for column in ("turn", "kind", "target", "status", "code"):
        table.add_column(column)
    for o in result.outcomes:
        table.add_row(str(o.turn + 1), o.operation.kind, o.operation.target, o.status, o.code or "")
    if result.outcomes:
        stderr.print(table)
    counts = Counter(o.status for o in result.outcomes)
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    line = (
        f"{result.status}: {result.turns} requests, {len(result.attempts)} attempts "
        f"({repairs} repairs); operations "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    )
    if result.error_code:
        line += f"\nerror: {result.error_code}: {result.error_message}"
    if result.report_path:
        line += f"\nreport: {result.report_path}"
    if result.commit_sha:
        line += f"\ncommit: {result.commit_sha}"
    stderr.print(line, markup=False, highlight=False)


def render(
    spec: Annotated[Path, typer.Argument(help="Agent spec (YAML).")],
    workspace: Annotated[Path | None, typer.Option(help="Notes folder")] = None,
    grammar: Annotated[bool, typer.Option(help="Also print each request's GBNF grammar")] = False,
    messages: Annotated[
        bool, typer.Option(help="Print the full chat messages (system + user), not just the XML")
    ] = False,
) -> None:
    """Print the request(s) exactly as they would be sent, for reading and diffing."""
    from toolwire.librarian.job import build_requests, load_context
    from toolwire.librarian.workspace import Workspace

    ctx = load_context(spec, workspace=workspace)
    requests = build_requests(ctx, Workspace.load(ctx.workspace_root))
    out = sys.stdout
    for tr in requests:
        if messages:
            for message in tr.messages:
                out.write(f"=== turn {tr.turn + 1} {message['role']} ===\n{message['content']}\n")
        else:
            out.write(tr.request_xml.rstrip("\n") + "\n")
        if grammar and tr.grammar:
            out.write(f"=== turn {tr.turn + 1} grammar ===\n{tr.grammar}\n")


def parse(
    file: Annotated[str, typer.Argument(help="Model output file, or - for stdin")],
    transport: Annotated[str, typer.Option(help="Wire format of the text")] = "xml_attrless",
    spec: Annotated[Path | None, typer.Option(help="Also validate against this spec")] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="With --spec: check targets against this notes folder")
    ] = None,
    strict: Annotated[bool | None, typer.Option(help="Strict mode [default: the spec's]")] = None,
) -> None:
    """Parse a model's answer: JSON on stdout; errors as JSON with code and position, exit 1."""
    from toolwire.errors import ProtocolError
    from toolwire.protocols.attrless import parse_response, response_to_dict

    if transport != "xml_attrless":
        raise typer.BadParameter(
            f"transport {transport!r} has no parser yet", param_hint="--transport"
        )
    text = (
        sys.stdin.read()
        if file == "-"
        else Path(file).read_text(encoding="utf-8", errors="replace")
    )
    loaded = None
    if spec is not None:
        from toolwire.spec import load_spec

        loaded = load_spec(spec)
    if strict is None:
        strict = bool(loaded and loaded.spec.constraints.strict_mode)
    try:
        response = parse_response(text, strict=strict)
    except ProtocolError as exc:
        print(json.dumps({"ok": False, "error": exc.to_dict()}, indent=2, ensure_ascii=False))
        raise typer.Exit(1) from None
    result: dict[str, Any] = {"ok": True, "response": response_to_dict(response)}
    if loaded is not None:
        result["validation"] = _validate_for_cli(response, loaded, workspace)
        if any(v["status"] == "rejected" for v in result["validation"]):
            result["ok"] = False
    print(json.dumps(result, indent=2, ensure_ascii=False))
    raise typer.Exit(0 if result["ok"] else 1)


def _validate_for_cli(response: Any, loaded: Any, workspace: Path | None) -> list[dict[str, Any]]:
    from toolwire.librarian.validate import validate_operations
    from toolwire.librarian.workspace import Workspace

    root = workspace
    if root is None and loaded.spec.schedule is not None:
        root = loaded.base_dir / loaded.spec.schedule.workspace
    if root is None:
        raise typer.BadParameter("validation needs a notes folder", param_hint="--workspace")
    outcomes = validate_operations(
        response,
        Workspace.load(root),
        turn=0,
        constraints=loaded.spec.constraints,
        topics=loaded.spec.taxonomy.topics,
        ops_so_far=0,
        seq_start=0,
    )
    return [
        {
            "operation_id": o.operation.operation_id,
            "kind": o.operation.kind,
            "target": o.operation.target,
            "status": o.status,
            "code": o.code,
            "detail": o.detail,
        }
        for o in outcomes
    ]


def undo(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix)")],
    workspace: Annotated[Path, typer.Option(help="The notes folder the run changed")],
    db: DbOption = None,
    force: Annotated[bool, typer.Option(help="Restore even notes edited since the run")] = False,
) -> None:
    """Restore the exact previous bytes of every note a run changed."""
    from toolwire.librarian.journal import undo_run
    from toolwire.settings import Settings
    from toolwire.store import Store

    settings = Settings()
    store = Store(db or settings.db, lock_timeout_s=settings.db_lock_timeout_s)
    from toolwire.memory.profiles import record_undo

    run = store.get_run(run_id)
    full_id = run["run_id"]
    restored = undo_run(workspace, full_id, force=force)
    store.mark_operations_undone(full_id)
    record_undo(store, run["user_id"], full_id)  # the user's profile remembers the undo
    for path in restored:
        stdout.print(f"restored {path}", markup=False, highlight=False)
    stderr.print(f"undone: run {full_id}, {len(restored)} file(s)", markup=False)


def register(app: typer.Typer) -> None:
    """Add run, render, parse and undo to the root app."""
    app.command()(run)
    app.command()(render)
    app.command()(parse)
    app.command()(undo)
