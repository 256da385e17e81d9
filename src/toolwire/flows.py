"""Prefect edge: the librarian job's steps as tasks of one `librarian` flow.

The composition lives in ``toolwire.librarian.job.run_librarian``; this module
only supplies a step runner that turns each step into a Prefect task and a
model-call task whose retries handle *transient* provider faults (timeouts,
429/5xx) with backoff. Repairs stay in the engine (they need a new prompt).

No Prefect server is needed: without ``PREFECT_API_URL`` Prefect starts a
temporary local one for the run (a few seconds on the first run).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "configure_prefect_env",
    "librarian_flow",
    "quiet_expected_failures",
    "run_librarian_flow",
    "spec_artifact_key",
    "sync_spec_version",
    "stable_task_name",
]

# Backoff for transient provider faults: 3 attempts in all (STACK.md: retries=2 -> 3 attempts).
MODEL_CALL_RETRIES = 2
MODEL_CALL_RETRY_DELAYS: list[float] = [1.0, 4.0]


def configure_prefect_env() -> None:
    """Quiet, offline Prefect defaults; a user's own settings win (setdefault)."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")


configure_prefect_env()

from prefect import flow, task  # noqa: E402  (environment first, then Prefect)
from prefect.cache_policies import NO_CACHE  # noqa: E402

from toolwire.domain import Completion, CompletionRequest  # noqa: E402
from toolwire.errors import ToolwireError, is_transient  # noqa: E402


def _retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, BaseException) and is_transient(exc)


@task(
    name="model-call",
    retries=MODEL_CALL_RETRIES,
    retry_delay_seconds=MODEL_CALL_RETRY_DELAYS,
    retry_condition_fn=_retry_if_transient,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def model_call(provider: Any, request: CompletionRequest) -> Completion:
    return provider.complete(request)


# The CLI's progress bar: a callable cannot be a flow parameter (parameters are
# sent to the Prefect API as JSON), so the in-process caller sets this hook.
progress_hook: Callable[[int, int], None] | None = None


def stable_task_name(step_name: str) -> str:
    """``turn-7`` -> ``turn``: the task a step belongs to, the same on every run.

    Prefect groups task runs by task name; numbering the name itself made each turn
    its own task (and Prefect then added a random suffix: ``turn-7-a1b``).
    """
    head, sep, tail = step_name.rpartition("-")
    return head if sep and tail.isdigit() else step_name


def task_step(name: str, fn: Callable[..., Any], *args: Any) -> Any:
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
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.runtime import flow_run

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
    """Drop the traceback from Prefect's log record of a task or flow that raised a
    ToolwireError: a typed, expected fault (server unreachable, store locked) whose
    code and message already say everything; the record itself stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        typed = isinstance(exc, ToolwireError)
        if typed:
            record.exc_info = None
            record.exc_text = None
        if cli_reports_typed_failures and record.levelno >= logging.ERROR:
            # The CLI prints the run's outcome and error code itself; Prefect's
            # "task failed" / "Finished in state Failed(...)" lines would repeat it.
            return not (typed or _names_a_typed_failure(record.getMessage()))
        return True


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


def run_job_in_flow(
    ctx: Any,
    run: Callable[..., Any],
    *,
    on_turn: Callable[[int, int], None] | None,
    artifact_key: str,
    description: str,
) -> Any:
    """Inside a flow: run a job's steps as tasks, model calls through ``model_call``,
    then publish the run's markdown report as an artifact. Shared by every job."""
    from prefect.artifacts import create_markdown_artifact

    quiet_expected_failures()
    try:
        result = run(
            ctx,
            call=lambda request: model_call(ctx.provider, request),
            step=task_step,
            on_turn=on_turn,
        )
    finally:
        ctx.provider.close()
    if result.report_path is not None:
        create_markdown_artifact(
            markdown=result.report_path.read_text(encoding="utf-8"),
            # The same key for every run of a spec: Prefect shows them as one history.
            key=spec_artifact_key(artifact_key, ctx.loaded.spec.name),
            description=f"{description} {result.run_id}",
        )
    return result


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
) -> Any:
    """Run the librarian once; returns the RunResult (a summary dict is logged)."""
    from prefect.runtime import flow_run

    from toolwire.librarian.job import prepare_run, run_librarian

    ctx = prepare_run(
        spec_path,
        workspace=workspace,
        db=db,
        model=model,
        transport=transport,
        dry_run=dry_run,
        commit=commit,
        record=record,
        user=user,
        flow_run_id=str(flow_run.id) if flow_run.id else None,
    )
    sync_spec_version(ctx.loaded.hash)
    return run_job_in_flow(
        ctx,
        run_librarian,
        on_turn=progress_hook,
        artifact_key="librarian",
        description="toolwire librarian run",
    )


def run_librarian_flow(
    spec_path: str | Path, on_turn: Callable[[int, int], None] | None = None, **kwargs: Any
) -> Any:
    """Call the flow in process (the CLI's default path); returns the RunResult."""
    global progress_hook
    progress_hook = on_turn
    try:
        return librarian_flow(str(spec_path), **kwargs)
    finally:
        progress_hook = None


quiet_expected_failures()
