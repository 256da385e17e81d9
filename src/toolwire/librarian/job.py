"""The librarian job as plain steps: prepare -> requests -> turns -> validate -> apply -> finish.

`run_librarian` composes the steps in plain Python; `toolwire.flows.job_flows` composes
the same steps as Prefect tasks. Nothing here imports Prefect. Each step lives
in the module named for what it holds: ``context`` (prepare, the run's store
hold, reading the notes), ``turn_requests``, ``decisions`` (the scorer's
judgements and incremental evidence), ``turns`` (model turns and validation),
``finish`` (apply, report, final rows). This module is the job's public face.

Failure policy: if any turn ends without a valid response after its repairs,
the run is ``Failed`` with that turn's error code and *nothing* is applied:
the workspace is never left with half a run in it. Every attempt is stored
the moment it exists, so a crash later in the run loses no raw text.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from toolwire.domain import Attempt, Completion, CompletionRequest, OperationOutcome
from toolwire.errors import INTERNAL_ERROR, ProviderError, ToolwireError
from toolwire.librarian.context import (
    RunContext,
    RunResult,
    load_context,
    load_workspace,
    prepare_run,
)
from toolwire.librarian.decisions import remember_evidence
from toolwire.librarian.finish import NotCommitted, apply_outcomes, finish_run
from toolwire.librarian.reorganize.plan import plan_reorganize
from toolwire.librarian.report import MAX_TRACEBACK
from toolwire.librarian.turn_requests import TurnRequest, build_requests
from toolwire.librarian.turns import run_turn, validate_turn
from toolwire.run.start import release_store
from toolwire.run.steps import StepRunner, direct_step

__all__ = [
    "RunContext",
    "TurnRequest",
    "RunResult",
    "load_context",
    "prepare_run",
    "load_workspace",
    "build_requests",
    "run_turn",
    "validate_turn",
    "apply_outcomes",
    "finish_run",
    "run_librarian",
    "release_store",
]


def _run_librarian_steps(
    ctx: RunContext,
    *,
    call: Callable[[CompletionRequest], Completion] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    step: StepRunner = direct_step,
) -> RunResult:
    """``run_librarian`` without the store release."""
    attempts: list[Attempt] = []
    outcomes: list[OperationOutcome] = []
    turns_done = 0

    def end(
        status: str,
        error: ToolwireError | None,
        diff: str = "",
        sha: str | None = None,
        trace: str | None = None,
    ):
        # The user's profile learns afterwards, in toolwire.lifecycle (every job alike).
        result = step(
            "finish",
            lambda: finish_run(
                ctx,
                status=status,
                error=error,
                turns=turns_done,
                outcomes=outcomes,
                attempts=attempts,
                diff=diff,
                commit_sha=sha,
                traceback=trace,
            ),
        )
        remember_evidence(ctx, result)
        return result

    try:
        workspace = step("load-workspace", load_workspace, ctx)
        requests = step("build-requests", build_requests, ctx, workspace)
        for tr in requests:
            turn = step(f"turn-{tr.turn + 1}", run_turn, ctx, tr, call)
            attempts.extend(turn.attempts)
            turns_done += 1
            if on_turn:
                on_turn(turns_done, len(requests))
            if not turn.ok:
                return end("Failed", turn.error)
            outcomes += step(
                f"validate-{tr.turn + 1}",
                validate_turn,
                ctx,
                workspace,
                tr,
                turn.value,
                outcomes,
            )
        # toolwire's own operations (reorganize: in the spec), planned on the turns' result
        outcomes += step("reorganize", plan_reorganize, ctx, workspace, outcomes)
        outcomes, diff, sha = step("apply", apply_outcomes, ctx, workspace, outcomes)
    except ProviderError as exc:
        return end("Failed", exc)
    except NotCommitted as exc:  # the notes changed: the rows say so, and why no commit
        outcomes = exc.outcomes
        end("Failed", exc, exc.diff)
        raise
    except ToolwireError as exc:
        end("Failed", exc)
        raise
    except Exception as exc:
        # Whatever escaped (a RecursionError, a bug): the run ends Failed with the
        # reason, never left `running` (issue #30 item 5); the cause stays chained.
        error = ToolwireError(
            f"internal error: {type(exc).__name__}: {exc}"[:500], code=INTERNAL_ERROR
        )
        # Prefect's logs and the serve terminal get one line; the traceback goes to the
        # store, in the run's report, where `toolwire show` prints it (issue 47).
        trace = "".join(traceback.format_exception(exc))[-MAX_TRACEBACK:]
        end("Failed", error, trace=trace)
        raise error from exc
    return end("ok", None, diff, sha)


def run_librarian(
    ctx: RunContext,
    *,
    call: Callable[[CompletionRequest], Completion] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    step: StepRunner = direct_step,
) -> RunResult:
    """The whole job. ``step(name, fn, *args)`` runs each step: directly by default,
    as a Prefect task under ``toolwire.flows.job_flows`` (same composition, one place).

    The run's hold on the store file (taken by ``prepare_run``) ends here, however
    the run ends."""
    try:
        return _run_librarian_steps(ctx, call=call, on_turn=on_turn, step=step)
    finally:
        release_store(ctx)
