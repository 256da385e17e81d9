"""`toolwire run | render | parse | undo`: the librarian job from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from toolwire.cli._options import DbOption
from toolwire.cli._output import stderr, stdout

__all__ = ["register"]


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
    from toolwire.cli._progress import StepProgress
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
    job = _job_for(spec, tooling_transport)
    if job.name == "agent":
        if dry_run or commit:
            raise UsageError("--dry-run and --commit apply to librarian (xml_attrless) runs only")
        del kwargs["dry_run"], kwargs["commit"]
    if prefect:
        # Spec, pack, workspace and path errors are the user's to fix: report them in one
        # line before Prefect starts (it would log them as a flow crash, traceback and all).
        checked = job.load(spec, workspace=workspace, model=model, transport=tooling_transport)
        if not checked.workspace_root.is_dir():
            raise UsageError(f"workspace {checked.workspace_root} is not a directory")
        _check_output_paths(db, record)
    progress = StepProgress(stderr, job.name, "request" if job.name == "librarian" else "turn")
    with progress:
        if prefect:
            result = _in_prefect(job.flow, spec, on_turn=progress.update, **kwargs)
        else:
            ctx = job.prepare(spec, **kwargs)
            try:
                result = job.run(ctx, on_turn=progress.update)
            finally:
                ctx.provider.close()
    _print_summary(result, dry_run)
    raise typer.Exit(0 if result.ok else 1)


def _in_prefect(flow: Any, spec: Path, **kwargs: Any) -> Any:
    """Call the flow; Prefect failing to start its temporary API (a loaded machine) is
    one line with what to do, not Prefect's traceback."""
    from toolwire import flows
    from toolwire.errors import ToolwireError

    # This command prints the run's outcome and error code itself: Prefect's own
    # one-line records of the same typed failure would only repeat it.
    flows.cli_reports_typed_failures = True
    try:
        return flow(spec, **kwargs)
    except RuntimeError as exc:
        if "Prefect API server" not in str(exc):
            raise
        raise ToolwireError(
            f"Prefect could not start: {exc} Retry, raise "
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, point PREFECT_API_URL at a "
            "running server, or run with --no-prefect",
            code="PREFECT_UNAVAILABLE",
        ) from None
    finally:
        flows.cli_reports_typed_failures = False


def _check_output_paths(db: Path | None, record: Path | None) -> None:
    """The store file and the recording can be written (``--db``/``--record``)."""
    from toolwire.cli._paths import require_writable_file
    from toolwire.settings import load_settings

    require_writable_file(db if db is not None else load_settings().db, "--db")
    if record is not None:
        require_writable_file(record, "--record")


class _Job:
    """The functions one kind of job (librarian or tool agent) is run with."""

    def __init__(self, name: str, load: Any, prepare: Any, run: Any, flow: Any) -> None:
        self.name, self.load, self.prepare, self.run, self.flow = name, load, prepare, run, flow


def _job_for(spec: Path, transport_override: str | None) -> _Job:
    """xml_attrless specs are librarian runs; every other transport is a tool agent."""
    import os

    from toolwire.domain import TRANSPORTS
    from toolwire.errors import UsageError
    from toolwire.spec import load_spec

    source, transport = "--tooling-transport", transport_override
    if not transport:
        source, transport = "TOOLWIRE_TRANSPORT", os.environ.get("TOOLWIRE_TRANSPORT")
    if not transport:
        source, transport = "spec", load_spec(spec).spec.transport
    # Checked first: an unknown transport would otherwise be taken for a tool agent and
    # fail on whatever that path checks first (--dry-run, a missing tool list).
    if transport not in TRANSPORTS:
        raise UsageError(
            f"{source}: unknown transport {transport!r}; expected one of {', '.join(TRANSPORTS)}"
        )
    if transport == "xml_attrless":
        from toolwire.flows import run_librarian_flow
        from toolwire.librarian.job import load_context, prepare_run, run_librarian

        return _Job("librarian", load_context, prepare_run, run_librarian, run_librarian_flow)
    from toolwire.agent import load_agent_context, prepare_agent_run, run_agent
    from toolwire.agent.flow import run_agent_flow

    return _Job("agent", load_agent_context, prepare_agent_run, run_agent, run_agent_flow)


def _print_changes(result: Any) -> None:
    """The librarian's old -> new per note, deferred notes and warnings (agents have none)."""
    from rich.table import Table

    changes = getattr(result, "changes", [])
    if changes:
        table = Table(title="what changed", show_lines=False)
        for column in ("note", "field", "old", "new"):
            table.add_column(column, overflow="fold")
        for c in changes:
            table.add_row(c.path, c.field, c.old or "-", c.new or "-")
        stderr.print(table)
    for d in getattr(result, "deferred", []):
        stderr.print(
            f"deferred {d.path}: {d.candidates or 'no candidates'} ({d.why})",
            markup=False,
            highlight=False,
        )
    for warning in getattr(result, "warnings", []):
        stderr.print(f"warning: {warning}", markup=False, highlight=False)


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
    _print_changes(result)
    counts = Counter(o.status for o in result.outcomes)
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    line = f"{result.status}: {result.turns} requests, {len(result.attempts)} attempts "
    if hasattr(result, "tool_calls"):  # a tool agent
        calls = Counter(str(c.get("status")) for c in result.tool_calls)
        line += f"({repairs} repairs); tool calls " + ", ".join(
            f"{n} {s}" for s, n in sorted(calls.items())
        )
    else:
        line += f"({repairs} repairs); operations " + (
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
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

    if _job_for(spec, None).name == "agent":
        _render_agent(spec, workspace, grammar)
        return
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


def _render_agent(spec: Path, workspace: Path | None, grammar: bool) -> None:
    """A tool agent's first request: every message, the native tool list, the grammar."""
    from toolwire.agent import load_agent_context
    from toolwire.agent.loop import render_first_request

    request = render_first_request(load_agent_context(spec, workspace=workspace))
    out = sys.stdout
    for message in request.messages:
        out.write(f"=== {message['role']} ===\n{message.get('content') or ''}\n")
    if request.tools:
        out.write("=== tools ===\n" + json.dumps(request.tools, indent=2) + "\n")
    if grammar and request.grammar:
        out.write(f"=== grammar ===\n{request.grammar}\n")


def undo(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix)")],
    workspace: Annotated[Path, typer.Option(help="The notes folder the run changed")],
    db: DbOption = None,
    force: Annotated[bool, typer.Option(help="Restore even notes edited since the run")] = False,
) -> None:
    """Restore the exact previous bytes of every note a run changed."""
    from toolwire.librarian.journal import undo_run
    from toolwire.settings import load_settings
    from toolwire.store import Store

    settings = load_settings()
    # A read path first: a mistyped --db is an error, never a new empty store.
    store = Store(db or settings.db, lock_timeout_s=settings.db_lock_timeout_s, create=False)
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
    from toolwire.cli.parse_cmd import parse

    app.command()(parse)
    app.command()(undo)
