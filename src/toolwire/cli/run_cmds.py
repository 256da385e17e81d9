"""`toolwire run | render | parse | undo`: the librarian job from the command line."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolwire.cli._options import DbOption, check_same_job, check_user
from toolwire.cli._output import shown, stderr, stdout

if TYPE_CHECKING:
    from toolwire.jobs import Job, JobResult, OnTurn, RunDetails, RunOptions
    from toolwire.spec.model import LoadedSpec
    from toolwire.store import Store

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
    dry_run: Annotated[
        bool, typer.Option(help="Print the plan on one screen; write no note")
    ] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Also print every change as a diff")] = False,
    details: Annotated[
        bool,
        typer.Option("--details", help="List every operation and change, not the one-screen plan"),
    ] = False,
    all_changes: Annotated[
        bool,
        typer.Option(
            "--all", help="Librarian: write every change (constraints.max_changes does not apply)"
        ),
    ] = False,
    commit: Annotated[bool, typer.Option(help="git-commit the changes (workspace in git)")] = False,
    commit_no_verify: Annotated[
        bool,
        typer.Option(
            "--commit-no-verify",
            help="With --commit: skip the repository's hooks and commit signing",
        ),
    ] = False,
    record: Annotated[
        Path | None, typer.Option(help="Write every completion to PATH as a replay script")
    ] = None,
    user: Annotated[str | None, typer.Option(help="User id [env TOOLWIRE_USER]")] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Librarian: recompute every note (embeddings, decisions), ignoring what "
            "earlier runs stored; by default a run works only on what changed",
        ),
    ] = False,
    prefect: Annotated[
        bool | None,
        typer.Option(
            "--prefect/--no-prefect",
            help="Run as a Prefect flow, or in plain Python [default: a flow when a Prefect "
            "API is configured (PREFECT_API_URL or Prefect's profile), else plain Python]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run an agent spec once (the librarian for xml_attrless specs)."""
    from toolwire.cli._progress import StepProgress
    from toolwire.jobs import RunOptions, job_for, resolve_options
    from toolwire.spec.settings import load_settings

    settings = load_settings()  # a bad TOOLWIRE_* value: one line, exit 2
    check_user(user)
    options = RunOptions(
        spec_path=str(spec),
        workspace=str(workspace) if workspace else None,
        db=str(db) if db else None,
        model=model,
        transport=tooling_transport,
        dry_run=dry_run,
        commit=commit or commit_no_verify,
        record=str(record) if record else None,
        user=user,
        commit_verify=not commit_no_verify,
        full=full,
        all_changes=all_changes,
    )
    options, resolved = resolve_options(options, settings)  # the run's one read of its spec
    check_same_job(spec, resolved, tooling_transport)
    job = job_for(resolved)
    if prefect is None:
        # Without a Prefect API a flow would run on a throwaway local server (~25 s of
        # start-up that shows nobody anything): plain Python then, the same lifecycle.
        from toolwire.prefect_settings import prefect_api_url

        prefect = prefect_api_url() is not None
    if (dry_run or commit) and not job.plans_only_on_dry_run:
        from toolwire.errors import UsageError

        raise UsageError("--dry-run and --commit apply to librarian (xml_attrless) runs only")
    if full and prefect:
        from toolwire.errors import UsageError

        raise UsageError("--full runs in plain Python for now: add --no-prefect")
    if commit or commit_no_verify:
        _check_commit(resolved.loaded, workspace, dry_run)
    if prefect:
        # Spec, pack, workspace and path errors are the user's to fix: report them in one
        # line before Prefect starts (it would log them as a flow crash, traceback and all).
        checked = job.load(options, settings)
        if not checked.workspace_root.is_dir():
            from toolwire.errors import UsageError

            raise UsageError(f"workspace {checked.workspace_root} is not a directory")
    # A folder given as --db or --record: one line and exit 2 before the run starts.
    _check_output_paths(db, record)
    from toolwire.run import phases

    progress = StepProgress(stderr, job.name, job.unit)
    try:
        with progress, phases.listen(progress.phase):
            if prefect:
                result = _in_prefect(job, options, progress.update)
            else:
                from toolwire.lifecycle import run_job

                result = run_job(options, on_turn=progress.update, settings=settings, job=job)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: which run ended, and how
        stderr.print(f"interrupted: {exc}" if str(exc) else "interrupted", markup=False)
        raise typer.Exit(128 + getattr(exc, "signum", 2)) from None  # 130 / 143 (SIGTERM)
    _print_summary(job, result, Display(dry_run, diff, details, spec))
    # `unchecked` finished without failing (nothing proved it done; the summary says so).
    raise typer.Exit(0 if result.ok or result.status == "unchecked" else 1)


def _in_prefect(job: Job, options: RunOptions, on_turn: OnTurn) -> JobResult:
    """Run the job's flow; Prefect failing to start its temporary API (a loaded machine)
    is one line with what to do, not Prefect's traceback."""
    from toolwire.cli._prefect_errors import api_unreachable
    from toolwire.flows import job_flows as flows
    from toolwire.prefect_settings import prefect_unavailable

    # This command prints the run's outcome and error code itself: Prefect's own
    # one-line records of the same typed failure would only repeat it.
    flows.cli_reports_typed_failures = True
    try:
        return flows.run_flow(job, options, on_turn)
    except RuntimeError as exc:
        # One line: Prefect's message may carry its server's whole stdout and stderr.
        unavailable = prefect_unavailable(exc, fallback="run with --no-prefect")
        if unavailable is None:
            unavailable = api_unreachable(exc, fallback="run with --no-prefect")
        if unavailable is None:
            raise
        raise unavailable from None
    finally:
        flows.cli_reports_typed_failures = False


def _check_commit(loaded: LoadedSpec, workspace: Path | None, dry_run: bool) -> None:
    """``--commit`` can commit: not with ``--dry-run`` (it writes nothing), and only in a
    git repository (outside one, the notes were applied, nothing was committed, and
    nothing was said). A ``.git`` above the folder is looked for: no git command runs
    in a folder before the run's own careful one (librarian.git_commit)."""
    from toolwire.errors import UsageError

    if dry_run:
        raise UsageError("--commit with --dry-run: a dry run writes nothing to commit")
    if workspace is None:
        schedule = loaded.spec.schedule
        if schedule is None:
            return  # the run says no workspace was given
        workspace = loaded.resolve(schedule.workspace)
    from toolwire.run.preflight import in_git_repository

    folder = workspace.resolve()
    if not in_git_repository(folder):
        raise UsageError(f"--commit: {folder} is not in a git repository; nothing would be "
                         "committed (leave --commit out, or `git init` it)")  # fmt: skip


def _check_output_paths(db: Path | None, record: Path | None) -> None:
    """The store file and the recording can be written (``--db``/``--record``)."""
    from toolwire.cli._paths import require_writable_file
    from toolwire.spec.settings import load_settings

    require_writable_file(db if db is not None else load_settings().db, "--db")
    if record is not None:
        require_writable_file(record, "--record")


@dataclass(frozen=True, slots=True)
class Display:
    """What the user asked to see of a run."""

    dry_run: bool
    diff: bool
    details: bool
    spec: Path


# More rows than this and the tables give way to the one-screen plan (issue 42: a first
# dry run printed ~3,900 lines and no summary).
_TABLE_ROWS = 20
_WARNINGS_SHOWN = 5


def _print_plan(run_id: str, details: RunDetails, display: Display) -> None:
    """The run on one screen: the plan, the first warnings, and what to run next."""
    warnings = [line for line in details.lines if line.startswith("warning: ")]
    lines = list(details.plan) + warnings[:_WARNINGS_SHOWN]
    if len(warnings) > _WARNINGS_SHOWN:
        lines.append(f"... and {len(warnings) - _WARNINGS_SHOWN} more warning(s) (--details)")
    again = f"toolwire run {shlex.quote(str(display.spec))}"
    if display.dry_run:
        lines.append(f"next: {again} --dry-run --details --diff   (every change, as a diff)")
        lines.append(f"      {again}   (apply it)")
    else:
        lines.append(f"next: toolwire show {run_id}   (every change)")
        lines.append(f"      toolwire undo {run_id}   (take it back)")
    for line in lines:
        stderr.print(shown(line), markup=False, highlight=False)


def _print_details(run_id: str, details: RunDetails, display: Display | None = None) -> None:
    """A job's own lines: operations, old -> new per note, deferred notes, warnings; the
    one-screen plan instead on a dry run or when the tables are long (not with --details)."""
    from rich.table import Table

    long = max(len(details.operations), len(details.changes)) > _TABLE_ROWS
    if details.plan and display and not display.details and (display.dry_run or long):
        _print_plan(run_id, details, display)
        return
    if details.operations:
        table = Table(title=f"run {run_id}", show_lines=False)
        for column in ("turn", "kind", "target", "status", "code"):
            table.add_column(column)
        for row in details.operations:
            table.add_row(*map(shown, row))
        stderr.print(table)
    if details.changes:
        changed = Table(title="what changed", show_lines=False)
        for column in ("note", "field", "old", "new"):
            changed.add_column(column, overflow="fold")
        for change in details.changes:
            changed.add_row(*map(shown, change))
        stderr.print(changed)
    for line in details.lines:
        stderr.print(shown(line), markup=False, highlight=False)


def _print_summary(job: Job, result: JobResult, display: Display) -> None:
    if display.diff and result.diff:
        stdout.print(result.diff, markup=False, highlight=False)
    _print_details(result.run_id, job.details(result), display)
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    line = f"{result.status}: {result.turns} {job.unit}s, {len(result.attempts)} attempts "
    line += f"({repairs} repairs); {job.summarize(result)}"
    if result.error_code:
        line += f"\nerror: {result.error_code}: {result.error_message}"
    if result.status == "unchecked":
        line += "\nunchecked: the spec declares no check, so nothing proved the task done"
    if result.report_path:
        line += f"\nreport: {result.report_path}"
    if result.commit_sha:
        line += f"\ncommit: {result.commit_sha}"
    stderr.print(shown(line), markup=False, highlight=False)


def render(
    spec: Annotated[Path, typer.Argument(help="Agent spec (YAML).")],
    workspace: Annotated[Path | None, typer.Option(help="Notes folder")] = None,
    grammar: Annotated[
        bool, typer.Option(help="Also print each request's GBNF grammar or JSON Schema")
    ] = False,
    messages: Annotated[
        bool, typer.Option(help="Print the full chat messages (system + user), not just the XML")
    ] = False,
) -> None:
    """Print the request(s) exactly as they would be sent, for reading and diffing."""
    from toolwire.jobs import RunOptions, job_for, resolve_options
    from toolwire.spec.settings import load_settings

    settings = load_settings()
    options = RunOptions(str(spec), str(workspace) if workspace else None)
    options, resolved = resolve_options(options, settings)
    check_same_job(spec, resolved, None)
    job = job_for(resolved)
    ctx = job.load(options, settings)
    sys.stdout.write(job.render(ctx, grammar, messages))


def _recorded_workspace(run: dict[str, Any]) -> Path:
    """The folder a run changed, as its row recorded it (issue 42: undo needed
    ``--workspace`` although the store knew it)."""
    from toolwire.errors import UsageError

    recorded = run.get("workspace")
    if not recorded or not Path(recorded).is_dir():
        where = f" ({recorded} is not a folder now)" if recorded else ""
        raise UsageError(
            f"run {run['run_id']} has no notes folder on record{where}: pass --workspace DIR"
        )
    return Path(recorded)


def undo(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix)")],
    workspace: Annotated[
        Path | None,
        typer.Option(help="The notes folder the run changed [default: as the store recorded it]"),
    ] = None,
    db: DbOption = None,
    force: Annotated[bool, typer.Option(help="Restore even notes edited since the run")] = False,
) -> None:
    """Restore the exact previous bytes of every note a run changed."""
    from toolwire.librarian.journal.write_ahead import restored_by_undo, undo_run
    from toolwire.spec.settings import load_settings
    from toolwire.store import Store

    settings = load_settings()
    # A read path first: a mistyped --db is an error, never a new empty store.
    store = Store(db or settings.db, lock_timeout_s=settings.db_lock_timeout_s, create=False)
    from toolwire.memory.profiles import record_undo

    run = store.get_run(run_id)
    full_id = run["run_id"]
    workspace = workspace or _recorded_workspace(run)
    # The journal is the undo that sticks (a run reads it: taken_back); the store's side
    # follows, operations marked last. An undo killed after the journal said `undone`
    # is finished here from the journal instead of refused as "already undone".
    finished = restored_by_undo(workspace, full_id) if _applied_ops(store, full_id) else None
    restored = finished if finished is not None else undo_run(workspace, full_id, force=force)
    from toolwire.librarian.journal.git_commit import revert_commit

    # A run committed with --commit is reverted by a commit too (none when it made none).
    reverted = revert_commit(workspace, full_id, restored)
    record_undo(store, run["user_id"], full_id)  # the user's profile remembers the undo
    if run["job"] == "librarian":  # later runs leave what was undone as it is
        from toolwire.librarian.journal.disk import workspace_root
        from toolwire.librarian.review_answers import remember_undo

        remember_undo(store, workspace_root(workspace), full_id, restored, user_id=run["user_id"])
    store.mark_operations_undone(full_id)
    from toolwire.librarian.report import record_undone

    record_undone(store, full_id, len(restored))  # its report says so from now on
    for path in restored:
        stdout.print(f"restored {path}", markup=False, highlight=False)
    if finished is not None:
        stderr.print(
            f"run {full_id} was undone before (its journal says so); its store records "
            "now say so too",
            markup=False,
        )
    stderr.print(f"undone: run {full_id}, {len(restored)} file(s)", markup=False)
    if reverted:
        stderr.print(f"revert commit: {reverted}", markup=False, highlight=False)


def _applied_ops(store: Store, run_id: str) -> int:
    _, rows = store.query(
        "SELECT count(*) FROM operations WHERE run_id = ? AND status = 'applied'", [run_id]
    )
    return int(rows[0][0])


def register(app: typer.Typer) -> None:
    """Add run, render, parse and undo to the root app."""
    app.command()(run)
    app.command()(render)
    from toolwire.cli.parse_cmd import parse

    app.command()(parse)
    app.command()(undo)
