"""`toolwire batch | serve | check-store | report | export | store merge`: runs at scale.

Prefect and DuckDB are imported inside the commands, so
``toolwire --help`` stays fast. Each command prints its own known errors as one
line (exit 1; 2 for usage errors), like the store commands.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolwire.cli import _output
from toolwire.cli._options import DbOption, check_same_job
from toolwire.errors import SpecError, StoreError, ToolwireError, UsageError

if TYPE_CHECKING:
    from toolwire.store import Store
    from toolwire.store.quality import QualityReport

__all__ = ["register", "store_app"]


store_app = typer.Typer(
    help="Work with store files: where the default one is; merge shards from other workers.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


class TaskRunner(StrEnum):
    threads = "threads"
    processes = "processes"
    dask = "dask"


class CheckFormat(StrEnum):
    table = "table"
    json = "json"


def _fail(exc: ToolwireError) -> typer.Exit:
    """One line per problem on stderr; exit 2 for the user's input, 1 for the rest."""
    if isinstance(exc, SpecError):  # as `spec check` and `run` print them
        for issue in exc.issues:
            _output.stderr.print(f"error: {issue}", markup=False, highlight=False)
        return typer.Exit(2)
    _output.error_line(exc)
    return typer.Exit(2 if isinstance(exc, UsageError) else 1)


def _store(db: Path | None, *, must_exist: bool = True) -> Store:
    """The store a command works on; an explicit --db that does not exist is an error."""
    from toolwire.spec.settings import load_settings
    from toolwire.store import Store

    settings = load_settings()
    path = db if db is not None else settings.db
    if must_exist and not path.exists():
        raise StoreError(f"no store file at {path} (pass --db PATH or set TOOLWIRE_DB)")
    return Store(path, lock_timeout_s=settings.db_lock_timeout_s)


def _reader(db: Path | None) -> Store:
    """The store a command reads views of (check-store, report, export): sandboxed."""
    from toolwire.spec.settings import load_settings
    from toolwire.store.sandbox import SandboxedStore

    settings = load_settings()
    return SandboxedStore(db if db is not None else settings.db,
                          lock_timeout_s=settings.db_lock_timeout_s)  # fmt: skip


def _split(values: str | None, flag: str) -> list[str] | None:
    if values is None:
        return None
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not items:  # `--models ,` silently ran the spec's model
        raise UsageError(f"{flag} {values!r}: no name in it; give a list, or leave it out")
    return items


def _check_batch_flags(runner: TaskRunner, dask_address: str | None, batch_id: str | None) -> None:
    """Flags that were silently ignored (``--dask-address`` without dask) or stored as
    given (a batch id with a newline, printed in every report line naming it)."""
    from toolwire.spec.values import is_one_line

    if dask_address is not None and runner != TaskRunner.dask:
        raise UsageError("--dask-address applies to --task-runner dask only")
    if batch_id is not None and (not is_one_line(batch_id) or len(batch_id) > 200):
        raise UsageError("--batch-id: one non-blank line of at most 200 characters")


def _print_quality(report: QualityReport) -> None:
    for result in report.results:
        line = result.summary()
        (_output.stdout if result.success else _output.stderr).print(
            line, markup=False, highlight=False
        )


# -- batch ---------------------------------------------------------------------------------


def batch_command(
    spec: Annotated[Path, typer.Argument(help="Agent spec (YAML).")],
    workspace: Annotated[
        list[Path], typer.Option("--workspace", "-w", help="A workspace folder (repeatable).")
    ],
    models: Annotated[
        str | None,
        typer.Option(help="Comma-separated PROVIDER:NAME list; may contain {transport}."),
    ] = None,
    transports: Annotated[
        str | None, typer.Option(help="Comma-separated transports [default: the spec's].")
    ] = None,
    db: DbOption = None,
    task_runner: Annotated[
        TaskRunner, typer.Option(help="threads: one process; processes/dask: per-worker shards.")
    ] = TaskRunner.threads,
    # At most 256: 10**20 ran every run, then failed recording the batch (INT32).
    max_workers: Annotated[
        int, typer.Option(max=256, help="Concurrency limit (runs at once).")
    ] = 2,
    dask_address: Annotated[
        str | None, typer.Option(help="Scheduler address of a running Dask cluster.")
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Librarian: plan only, write no note.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            help="Run the whole-store data-quality checks at the end (off by default: they "
            "read every row of the store; `toolwire check-store` runs them on their own)."
        ),
    ] = False,
    batch_id: Annotated[str | None, typer.Option(help="Batch id [default: random].")] = None,
) -> None:
    """Run the cross product workspaces x models x transports as one Prefect flow.

    Exits 1 when a run ends Failed, a planned run is missing from the store or the
    store fails its checks (the summary counts each).
    """
    from toolwire.cli._progress import StepProgress
    from toolwire.flows.batch import Outcome, prepare_batch, run_batch

    try:  # spec, model and folder errors in one line, before Prefect starts
        _check_batch_flags(task_runner, dask_address, batch_id)
        from toolwire.run.base import resolve_loaded
        from toolwire.spec.model import load_spec
        from toolwire.spec.settings import load_settings

        model_list, transport_list = _split(models, "--models"), _split(transports, "--transports")
        settings = load_settings()
        chosen: list[str | None] = list(transport_list) if transport_list else [None]
        loaded = load_spec(spec)
        for transport in chosen:  # each run keeps the spec's job
            resolved = resolve_loaded(loaded, settings, None, transport)
            check_same_job(spec, resolved, transport, flag="--transports")
        prepare_batch(spec, workspace, model_list, transport_list)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    progress = StepProgress(_output.stderr, "batch", "run")

    def on_progress(done: int, total: int, outcome: Outcome) -> None:
        progress.update(done, total, str(outcome["status"]))

    try:
        with progress:
            result = run_batch(
                spec,
                workspace,
                models=model_list,
                transports=transport_list,
                db=db,
                task_runner=task_runner.value,
                max_workers=max_workers,
                dask_address=dask_address,
                dry_run=dry_run,
                check=check,
                batch_id=batch_id,
                on_progress=on_progress,
            )
    except ToolwireError as exc:
        raise _fail(exc) from exc
    except RuntimeError as exc:  # Prefect's temporary server too slow to start: one line
        from toolwire.cli._prefect_errors import api_unreachable
        from toolwire.prefect_settings import prefect_unavailable

        unavailable = prefect_unavailable(exc) or api_unreachable(exc)
        if unavailable is None:
            raise
        raise _fail(unavailable) from None
    _print_batch(result)
    raise typer.Exit(0 if result.ok else 1)


def _print_batch(result: Any) -> None:
    from collections import Counter

    from rich.table import Table

    groups: Counter[tuple[str, str, str]] = Counter(
        (str(o.get("model") or "(spec)"), str(o.get("transport") or "(spec)"), o["status"])
        for o in result.outcomes
    )
    table = Table(title=f"batch {result.batch_id}", title_justify="left")
    for column in ("model", "transport", "status", "runs"):
        table.add_column(column)
    for (model, transport, status), n in sorted(groups.items()):
        table.add_row(model, transport, status, str(n))
    _output.stderr.print(table)
    for o in result.outcomes:
        if o["status"] not in ("ok", "unchecked", "Failed"):
            line = f"{o['status']}: {o['workspace']}: {o['error_code']}: {o['error_message']}"
            _output.stderr.print(line, markup=False, highlight=False)
    if result.quality is not None:
        for failure in result.quality.failures:
            _output.stderr.print(failure.summary(), markup=False, highlight=False)
    _output.stderr.print(f"{result.counts()}; store {result.db}", markup=False, highlight=False)


# -- serve ---------------------------------------------------------------------------------


def serve_command(
    specs: Annotated[
        list[Path] | None, typer.Argument(help="Spec files or folders [default: specs/].")
    ] = None,
    db: DbOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Most flow runs at once.")] = None,
) -> None:
    """Serve every scheduled spec as a Prefect deployment until Ctrl-C (needs a server)."""
    from toolwire.flows.schedule import serve_specs

    try:
        serve_specs(specs or [Path("specs")], db=db, limit=limit)
    except ToolwireError as exc:
        raise _fail(exc) from exc


# -- check-store -----------------------------------------------------------------------------


def check_store_command(
    db: DbOption = None,
    dataset: Annotated[
        list[Path] | None,
        typer.Option(help="Check a folder of shards / Parquet files instead of --db."),
    ] = None,
    fmt: Annotated[CheckFormat, typer.Option("--format", "-f")] = CheckFormat.table,
    record: Annotated[
        bool, typer.Option(help="Store the outcome in the quality_checks table.")
    ] = False,
) -> None:
    """Run the data-quality expectations; exit 1 naming each one that fails."""
    from toolwire.store.quality import check_store, record_quality, run_checks

    try:
        if dataset:
            if record:
                raise UsageError("--record writes to a store file; it cannot go with --dataset")
            from toolwire.store.sandbox import lock_down
            from toolwire.store.shards import open_dataset

            con = open_dataset(dataset, parquet_in_memory=True)
            try:
                lock_down(con)  # the checks run with no file access, as every store read
                report = run_checks(con)
            finally:
                con.close()
        else:
            store = _reader(db)
            report = check_store(store)
            if record:
                record_quality(store, report)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    if fmt is CheckFormat.json:
        payload = {
            "ok": report.ok,
            "check_id": report.check_id,
            "results": [
                {
                    "expectation": r.name,
                    "success": r.success,
                    "checked_rows": r.checked_rows,
                    "unexpected_count": r.unexpected_count,
                    "sample": r.sample,
                    "error": r.error,
                }
                for r in report.results
            ],
        }
        sys.stdout.write(json.dumps(payload, default=str, ensure_ascii=False) + "\n")
    else:
        _print_quality(report)
    raise typer.Exit(0 if report.ok else 1)


# -- report / export -------------------------------------------------------------------------


def report_command(
    html: Annotated[Path, typer.Option("--html", help="Write the HTML page here.")],
    run_id: Annotated[str | None, typer.Argument(help="Run id or unique prefix.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", help="All runs of a batch.")] = None,
    db: DbOption = None,
    # 1..1,000,000: 0 wrote an empty report, -5 or 10**23 was a DuckDB error (exit 1).
    limit: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Without RUN_ID/--batch: newest N runs.")
    ] = 200,
) -> None:
    """Write a self-contained HTML report: runs, charts, operations with diffs."""
    from toolwire.cli._paths import require_writable_file
    from toolwire.htmlreport import write_html_report

    try:
        if run_id and batch:
            raise UsageError("give a RUN_ID or --batch, not both")
        folder = html.expanduser().parent
        if not folder.is_dir():  # a typo must not grow folders: say so, create nothing
            raise UsageError(f"--html: no folder {folder} (create it first, or pick another)")
        require_writable_file(html, "--html")
        path = write_html_report(_reader(db), html, run_id=run_id, batch_id=batch, limit=limit)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    _output.stderr.print(f"report: {path}", markup=False, highlight=False)


def export_command(
    parquet: Annotated[Path, typer.Option("--parquet", help="Folder for <table>.parquet files.")],
    db: DbOption = None,
) -> None:
    """Export every store table as Parquet (for Spark, pandas, or `sql --dataset`)."""
    from toolwire.cli._paths import require_writable_dir
    from toolwire.store.shards import export_parquet

    try:
        require_writable_dir(parquet, "--parquet")
        counts = export_parquet(_reader(db), parquet)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    for table, n in counts.items():
        _output.stdout.print(f"{table}\t{n}", markup=False, highlight=False)


# -- store merge -----------------------------------------------------------------------------


@store_app.command("merge")
def merge_command(
    shards: Annotated[list[Path], typer.Argument(help="Shard files or folders of *.duckdb.")],
    db: DbOption = None,
) -> None:
    """Copy every row of the shards into the --db store (idempotent)."""
    from toolwire.store.shards import merge_stores

    try:
        target = _store(db, must_exist=False)
        files: list[Path] = []
        for path in shards:
            files += sorted(path.rglob("*.duckdb")) if path.is_dir() else [path]
        # A folder may hold the target itself (merging data/ into data/toolwire.duckdb).
        others = [f for f in files if f.resolve() != target.path]
        if not others and files:
            raise UsageError(
                f"nothing to merge: {target.path} is the target store itself "
                "(name other shards, or pick another target with --db)"
            )
        if not others:
            raise UsageError(f"no .duckdb files to merge in {', '.join(map(str, shards))}")
        files = others
        result = merge_stores(target, files)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    for table, n in result.rows.items():
        _output.stdout.print(f"{table}\t{n}", markup=False, highlight=False)
    _output.stderr.print(
        f"merged {len(result.sources)} file(s), {result.total} new rows",
        markup=False,
        highlight=False,
    )
    if any(result.left_out.values()):
        left = ", ".join(f"{n} {table}" for table, n in result.left_out.items() if n)
        _output.stderr.print(
            f"left out cached rows ({left}): they are not checked, the next run recomputes them",
            markup=False,
            highlight=False,
        )


@store_app.command("path")
def path_command(db: DbOption = None) -> None:
    """Print the store file commands use, and why: --db, TOOLWIRE_DB or the default."""
    from toolwire.spec.locations import store_location

    path, source = store_location(db)
    _output.stdout.print(str(path.expanduser().resolve()), markup=False, highlight=False)
    exists = "exists" if path.exists() else "not created yet"
    _output.stderr.print(f"({source}; {exists})", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add batch, serve, check-store, report, export and the `store` group to the root app."""
    app.command("batch")(batch_command)
    app.command("serve")(serve_command)
    app.command("check-store")(check_store_command)
    app.command("report")(report_command)
    app.command("export")(export_command)
    app.add_typer(store_app, name="store")
