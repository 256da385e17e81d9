"""One run, whatever starts it: settings -> job -> prepare -> retrying provider -> run -> memory.

``toolwire run`` (with or without Prefect), every batch item and every served
deployment call :func:`run_job`, so a behaviour fixed here is fixed for all
of them: the settings come from ``load_settings()`` (a bad ``TOOLWIRE_*``
value is one UsageError), the job from the table in ``toolwire.jobs``, model
calls go through the retry policy (``wrap``: plain retries, or the Prefect
task per call that the flows hand in), the user's profile learns from
every job that ``remembers``, and the run's start and end are logged on the
``toolwire.run`` logger (which the flows send to Prefect's run logs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from toolwire.jobs import (
    Job,
    JobContext,
    JobResult,
    OnTurn,
    RunOptions,
    job_for,
    resolve_options,
)
from toolwire.memory.synthesis import after_run
from toolwire.providers.base import Provider
from toolwire.providers.retrying import with_retries
from toolwire.run.interrupts import RunInterrupted, interruptible, shielded
from toolwire.run.phases import announcing
from toolwire.run.start import settle_interrupted
from toolwire.run.steps import StepRunner, direct_step
from toolwire.spec.settings import Settings, load_settings

__all__ = ["log", "run_job"]

log = logging.getLogger("toolwire.run")


def run_job(
    options: RunOptions,
    *,
    on_turn: OnTurn | None = None,
    step: StepRunner = direct_step,
    on_start: Callable[[JobContext], None] | None = None,
    settings: Settings | None = None,
    job: Job | None = None,
    wrap: Callable[[Provider], Provider] = with_retries,
) -> JobResult:
    """Run ``options.spec_path`` once; returns the job's result (``ok`` or ``Failed``).

    Raises ToolwireError for what stops a run before its row exists (a bad spec,
    flag or setting) and for faults the job could not record as a Failed run.
    ``on_start(ctx)`` runs once the run row is written (batch tags it). ``step`` runs
    each step and ``wrap`` wraps the model calls: the edge (``toolwire.flows``) hands in
    its Prefect task and wrapper, so the core never looks for Prefect.
    """
    settings = settings or load_settings()
    options, resolved = resolve_options(options, settings)  # the run's one read of its spec
    job = job or job_for(resolved)
    ctx = job.prepare(options, settings)
    assert ctx.provider is not None and ctx.store is not None  # prepare opens both
    plain = ctx.provider
    step = announcing(step)  # the CLI shows each step as it begins (phases.listen)
    provider = ctx.provider = wrap(plain)
    log.info(
        "run %s started: %s spec %s, model %s, transport %s, workspace %s",
        ctx.run_id,
        job.name,
        ctx.loaded.spec.name,
        ctx.model_cfg.name,
        ctx.transport,
        ctx.workspace_root,
    )
    try:
        with interruptible():  # SIGTERM as Ctrl-C; the apply of notes defers both
            try:
                if on_start is not None:
                    on_start(ctx)
                result = job.run(ctx, on_turn, step)
                if job.remembers(options):
                    # Seed 004: learn about the user once the result is stored; never
                    # raises. The plain provider: memory is not worth retries or a task.
                    mode = ctx.loaded.spec.memory.synthesis
                    step(
                        "remember-user", after_run, ctx.store, plain, ctx.user_id, ctx.run_id, mode
                    )
            except KeyboardInterrupt as exc:
                _end_interrupted(job, ctx, exc)
    except Exception as exc:
        log.error("run %s stopped: %s", ctx.run_id, exc)
        raise
    finally:
        provider.close()
    _log_end(job, result)
    return result


def _end_interrupted(job: Job, ctx: JobContext, exc: KeyboardInterrupt) -> None:
    """Ctrl-C or SIGTERM: the run ends Failed (INTERRUPTED) now, not when a later run
    finds its process gone; raises RunInterrupted naming the run. A second signal while
    the run row is written waits for it (shielded)."""
    assert ctx.store is not None
    why = str(exc) or "stopped by Ctrl-C (SIGINT)"
    signum = exc.signum if isinstance(exc, RunInterrupted) else 2
    with shielded():
        message = settle_interrupted(
            ctx.store, ctx.run_id, ctx.workspace_root, why, job.notes_state
        )
    log.error("run %s Failed: INTERRUPTED: %s", ctx.run_id, message or why)
    raise RunInterrupted(
        f"run {ctx.run_id} Failed: INTERRUPTED: {message or why}", signum
    ) from None


def _log_end(job: Job, result: JobResult) -> None:
    summary = f"{result.turns} {job.unit}s, {len(result.attempts)} attempts; "
    summary += job.summarize(result)
    if result.status != "Failed":  # ok, or unchecked (nothing proved it done)
        log.info("run %s %s: %s", result.run_id, result.status, summary)
    else:
        log.error(
            "run %s Failed: %s: %s (%s)",
            result.run_id,
            result.error_code,
            result.error_message,
            summary,
        )
