"""Prefect edge: every job's run as a flow, its steps as tasks, its model calls as
retrying tasks.

The run itself is ``toolwire.lifecycle.run_job`` (the same for every entry
point); a flow only adds what Prefect gives: each step a task (``task_step``),
each model call a ``model-call`` task with the shared retry policy (the
provider wrapper in ``toolwire.flows.model_call``, handed to ``run_job`` as
its ``wrap``), the report as an artifact, toolwire's log lines in the flow
run's logs, and a flow state that says what the run says: a run that ends
``Failed`` is a ``Failed`` flow run whose message starts with the error code,
so Prefect's automations, alerts and ``deployment run --watch`` see it.

No Prefect server is needed: without ``PREFECT_API_URL`` Prefect starts a
temporary local one for the run (a few seconds on the first run).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, cast

__all__ = [
    "agent_flow",
    "flow_for",
    "librarian_flow",
    "quiet_expected_failures",
    "run_flow",
    "run_librarian_flow",
    "spec_artifact_key",
    "sync_spec_version",
    "stable_task_name",
]

from prefect import Flow, flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import DeploymentUpdate
from prefect.exceptions import FailedRun
from prefect.logging.handlers import APILogHandler, PrefectConsoleHandler
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State

from toolwire.errors import ToolwireError
from toolwire.flows.model_call import with_prefect_retries
from toolwire.jobs import JOBS, Job, JobContext, JobResult, OnTurn, RunOptions
from toolwire.lifecycle import run_job

if TYPE_CHECKING:
    from pathlib import Path

# The CLI's progress bar: a callable cannot be a flow parameter (parameters are
# sent to the Prefect API as JSON), so the in-process caller sets this hook.
progress_hook: OnTurn | None = None


def stable_task_name(step_name: str) -> str:
    """``turn-7`` -> ``turn``, ``turn-3-repair-1`` -> ``turn-repair``: the task a step
    belongs to, the same on every run.

    Prefect groups task runs by task name; numbering the name itself made each turn
    (and each agent repair) its own task, and Prefect then added a random suffix.
    """
    return "-".join(part for part in step_name.split("-") if not part.isdigit()) or step_name


def task_step(name: str, fn: Callable[..., object], *args: object) -> object:
    """Run one job step as a Prefect task (no caching: inputs hold live handles).

    The task is named after the step's kind (``turn``) and the task run after the
    step itself (``turn-7``), without Prefect's random suffix.
    """
    return task(
        name=stable_task_name(name),
        task_run_name=name,
        cache_policy=NO_CACHE,
        persist_result=False,
    )(fn)(*args)


def spec_artifact_key(job: str, spec_name: str) -> str:
    """One artifact key per job and spec, so Prefect keeps a spec's reports as one history.

    Prefect keys allow lowercase letters, digits and dashes only.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", f"{job}-{spec_name}".lower()).strip("-")
    return slug or job


def sync_spec_version(spec_hash: str) -> None:
    """Make Prefect show the spec hash this run really uses.

    A served deployment's version was the spec hash when ``serve`` started: edit the
    spec and Prefect showed one hash, the store another. So each flow run sets its
    own ``flow_version`` to the hash it loaded and, when it belongs to a deployment
    whose version differs, moves the deployment's version to it. Best effort: a
    Prefect API hiccup is logged, never fails the run.
    """
    if not flow_run.id:
        return
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, flow_version=spec_hash)
            deployment_id = client.read_flow_run(flow_run.id).deployment_id
            if deployment_id:
                deployment = client.read_deployment(deployment_id)
                if deployment.version != spec_hash:
                    client.update_deployment(deployment_id, DeploymentUpdate(version=spec_hash))
    except Exception as exc:  # noqa: BLE001 - the run matters more than its label
        logging.getLogger(__name__).warning("could not set the spec hash on Prefect: %s", exc)


class _OneLineToolwireFailures(logging.Filter):
    """A failed run is one ERROR line: toolwire's own ``run ... Failed: CODE: ...``.

    Prefect's records that repeat it are dropped: a task that raised a ToolwireError
    (a typed, expected fault whose code and message say everything: "task failed",
    "Finished in state Failed(...)"), and the engine's "Engine execution exited with
    unexpected exception" with the traceback of ``FailedRun``, which is only the flow's
    Failed state raised again (2,700 characters, 40 terminal lines per served failed
    run). Another exception keeps its record; a typed one loses its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        typed = isinstance(exc, ToolwireError)
        if typed:
            record.exc_info = None
            record.exc_text = None
        if record.levelno < logging.ERROR:
            return True
        message = record.getMessage()
        if typed or isinstance(exc, FailedRun) or _names_a_typed_failure(message):
            return False
        # The CLI prints the run's outcome itself: a Failed run is a Failed flow state
        # whose message is the run's error.
        return not (cli_reports_typed_failures and message.startswith("Finished in state Failed"))


# Set by `toolwire run` while it runs a flow in process (it reports failures itself).
cli_reports_typed_failures = False


def _names_a_typed_failure(message: str) -> bool:
    """Prefect's state messages name the exception class: ``... exception ProviderUnreachable:``."""
    return any(f"exception {name}" in message for name in _toolwire_error_names())


def _toolwire_error_names() -> set[str]:
    names: set[str] = set()
    pending: list[type] = [ToolwireError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending += cls.__subclasses__()
    return names


def quiet_expected_failures() -> None:
    """Install the filter on Prefect's run loggers (idempotent; Prefect may reconfigure
    logging at start-up, so every flow calls this when it starts)."""
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLineToolwireFailures) for f in logger.filters):
            logger.addFilter(_OneLineToolwireFailures())


class _CliPrintsItsOwnRunLines(logging.Filter):
    """On Prefect's console handler: drop toolwire's run lines while `toolwire run` runs
    the flow in process (it prints the run's outcome itself); Prefect's API still gets
    them, so the flow run's Logs tab shows them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (cli_reports_typed_failures and record.name == "toolwire.run")


def show_run_lines() -> None:
    """Let toolwire's INFO lines (run started/ended, retries) through to Prefect's run logs
    and Prefect's console handler (so `toolwire serve` prints a served run's lines)."""
    logger = logging.getLogger("toolwire")
    if not any(isinstance(h, APILogHandler) for h in logger.handlers):
        # PREFECT_LOGGING_EXTRA_LOGGERS adds it when Prefect sets logging up; a process
        # that imported Prefect before toolwire set that variable gets it here.
        logger.addHandler(APILogHandler())
    logger.setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            isinstance(f, _CliPrintsItsOwnRunLines) for f in handler.filters
        ):
            handler.addFilter(_CliPrintsItsOwnRunLines())


def _run_in_flow(job: Job, options: RunOptions) -> State:
    """The body of every job's flow: run, publish the report, end in the run's state."""
    quiet_expected_failures()
    show_run_lines()
    options = replace(options, flow_run_id=str(flow_run.id) if flow_run.id else None)
    spec_names: list[str] = []

    def started(ctx: JobContext) -> None:
        spec_names.append(ctx.loaded.spec.name)
        sync_spec_version(ctx.loaded.hash)

    result = run_job(
        options,
        on_turn=progress_hook,
        step=task_step,
        on_start=started,
        job=job,
        wrap=with_prefect_retries,
    )
    if result.report_path is not None:
        create_markdown_artifact(
            markdown=artifact_markdown(
                result.report_path.read_text(encoding="utf-8"), result.run_id
            ),
            # The same key for every run of a spec: Prefect shows them as one history.
            key=spec_artifact_key(job.name, spec_names[0]),
            description=f"toolwire {job.name} run {result.run_id}",
        )
    if flow_run.id and _collecting:
        _results[str(flow_run.id)] = result
    if result.ok:
        return Completed(message=f"run {result.run_id} ok")
    if result.status == "unchecked":  # done as far as the model says; nothing proved it
        return Completed(name="Unchecked", message=f"run {result.run_id} unchecked (no check)")
    # The run's own verdict, code first: what alerts and `deployment run --watch` act on.
    # The state holds that one line and nothing else: a served run's engine turns a Failed
    # state's data into an exception, and a RunResult there (prompts, note bodies) landed
    # in Prefect's logs and on the serve terminal as an 8,000-character TypeError.
    return Failed(message=state_message(result))


def artifact_markdown(report: str, run_id: str) -> str:
    """The report as Prefect keeps it: its head (status, spec, model, counts) only.

    The rest quotes the notes (old and new titles, the diff's context lines) and the
    model's reasons; Prefect's database is no place for the user's notes. The whole
    report stays in the store and beside it, where `toolwire show` reads it.
    """
    head = report.split("\n## ", 1)[0].rstrip("\n")  # the title and the counted headline
    run = re.search(r"^## Run\n.*?(?=^## |\Z)", report, re.MULTILINE | re.DOTALL)
    if run:  # the librarian's report puts what changed first: its facts follow
        head += "\n\n" + run.group(0).rstrip("\n")
    return f"{head}\n\nThe full report (what changed, operations, diff): `toolwire show {run_id}`\n"


# The in-process caller's results, by flow run id: a state carries no run object (above),
# so `run_flow` picks its result up here. Filled only while a `run_flow` call waits.
_results: dict[str, JobResult] = {}
_collecting = 0
MESSAGE_CHARS = 300


def state_message(result: JobResult) -> str:
    """``CODE: first line of the message``, at most MESSAGE_CHARS characters."""
    lines = (result.error_message or "").strip().splitlines()
    text = f"{result.error_code}: {lines[0] if lines else ''}".strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


@flow(name="librarian", log_prints=False, persist_result=False)
def librarian_flow(
    spec_path: str,
    workspace: str | None = None,
    db: str | None = None,
    model: str | None = None,
    transport: str | None = None,
    dry_run: bool = False,
    commit: bool = False,
    record: str | None = None,
    user: str | None = None,
    commit_verify: bool = True,
    all_changes: bool = False,
) -> State:
    """Run a librarian spec once; the state says ok or the error code (never the run)."""
    options = RunOptions(spec_path, workspace, db, model, transport, dry_run, commit, record, user)
    options = replace(options, commit_verify=commit_verify, all_changes=all_changes)
    return _run_in_flow(JOBS["librarian"], options)


@flow(name="agent", log_prints=False, persist_result=False)
def agent_flow(
    spec_path: str,
    workspace: str | None = None,
    db: str | None = None,
    model: str | None = None,
    transport: str | None = None,
    record: str | None = None,
    user: str | None = None,
) -> State:
    """Run a tool-agent spec once; the state says ok or the error code (never the run)."""
    options = RunOptions(spec_path, workspace, db, model, transport, record=record, user=user)
    return _run_in_flow(JOBS["agent"], options)


_FLOWS: dict[str, object] = {"librarian": librarian_flow, "agent": agent_flow}


def flow_for(job: Job) -> Flow[..., State]:
    """The Prefect flow of ``job`` (its ``flow`` entry names this module's attribute)."""
    return cast("Flow[..., State]", _FLOWS[job.name])


def run_flow(job: Job, options: RunOptions, on_turn: OnTurn | None = None) -> JobResult:
    """Call ``job``'s flow in process (the CLI's default path); returns the run's result,
    ``Failed`` runs included. Raises what stopped the flow before a result existed."""
    global progress_hook, _collecting
    params: dict[str, object] = {
        "spec_path": options.spec_path,
        "workspace": options.workspace,
        "db": options.db,
        "model": options.model,
        "transport": options.transport,
        "record": options.record,
        "user": options.user,
    }
    if job.plans_only_on_dry_run:
        params |= {"dry_run": options.dry_run, "commit": options.commit}
        if not options.commit_verify:  # only when asked: older deployments lack the parameter
            params["commit_verify"] = False
        if options.all_changes:  # likewise (--all)
            params["all_changes"] = True
    progress_hook = on_turn
    _collecting += 1
    try:
        state = flow_for(job)(**params, return_state=True)
    finally:
        progress_hook = None
        _collecting -= 1
    result = _results.pop(str(state.state_details.flow_run_id), None)
    if result is not None:
        return result
    # No result: the flow stopped before the run ended (a crash, a bad spec).
    outcome = state.result(raise_on_failure=False)
    if isinstance(outcome, BaseException):
        raise outcome
    raise RuntimeError(f"the {job.name} flow ended {state.type.value} without a run result")


def run_librarian_flow(
    spec_path: str | Path, on_turn: OnTurn | None = None, **kwargs: str | bool | None
) -> JobResult:
    """The librarian's flow in process (tests, bench); returns the RunResult."""
    options = RunOptions(str(spec_path), **kwargs)  # type: ignore[arg-type]
    return run_flow(JOBS["librarian"], options, on_turn)


quiet_expected_failures()
