"""The tool-agent loop: request -> call -> parse -> run tools -> record, until a final report.

The system owns the loop (seed 003): every model call is one *iteration*,
bounded by ``constraints.max_iterations``; a run that reaches it without a
final report ends ``Failed`` with ``AGENT_MAX_ITERATIONS``.

Turns and repairs, as the store counts them: a *turn* is one step of the
task. A model answer that moves the run on (at least one call runs, or a
final report is accepted) closes the turn. An answer with nothing usable
(broken protocol, only refused tags, a final report that fails its format)
is fed back to the model as the next input, never dropped (seed 001), and
the next call is a ``repair`` attempt of the same turn. After
``max_repair_retries`` unusable answers in a row the run ends ``Failed``
with the last error's code, except over ``xct``, where seed 003 makes
errors ordinary results and only ``max_iterations`` stops the run.

Two guards keep a run bounded by more than its iteration count: the request
is compacted to the context window (``agent.history``: old tool results
shortened in the context, whole in the store) and repeats are answered as
such (``agent.loop_guard``: a run that keeps repeating ends ``Failed`` with
``AGENT_LOOP_DETECTED``).

Under a grammar, what a small model needs and no task is keyed to: the first
call's tool is chosen in a short side request (``agent.first_tool``; stored as
the turn's ``first_tool`` attempt, -1, with its own reply and tokens), paths
are limited (``agent.grammar_tools``), the task is restated after the last
message, and the last model call, once a tool ran, may only finish. Every
final report carries the last tool results, quoted by the system
(``agent.quotes``).

Every attempt is stored the moment it exists (before any tool runs); tool
calls, refused tags and the final report become ``tool_calls`` rows when
the run finishes, in one transaction with the run row. ``run_agent`` runs
each step through ``step(name, fn, *args)``: plain calls by default, Prefect
tasks under ``toolwire.agent.flow``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire.agent.accounting import ToolLedger
from toolwire.agent.checks import run_outcome
from toolwire.agent.context import AgentContext
from toolwire.agent.first_tool import FIRST_TOOL_KIND, choice_attempt, choice_request, read_choice
from toolwire.agent.grammar_tools import grammar_tools, note_had
from toolwire.agent.history import BUDGET_SHARE, compact_messages, compacted_floor
from toolwire.agent.loop_guard import AGENT_LOOP_DETECTED, LoopGuard
from toolwire.agent.quotes import with_quotes
from toolwire.agent.report import render_agent_report
from toolwire.agent.transports import make_adapter
from toolwire.agent.transports.base import (
    AGENT_NO_ACTION,
    AgentSetup,
    TransportAdapter,
    protocol_error,
)
from toolwire.agent.turn_reader import AGENT_PARSER_ERROR, read_completion
from toolwire.agent.write_targets import WriteTargets
from toolwire.domain import Attempt, Completion, CompletionRequest, FinalReport, OperationOutcome
from toolwire.errors import ProtocolError, ProviderError, ToolwireError
from toolwire.memory.tokens import estimate_tokens
from toolwire.run.end import record_run_end
from toolwire.run.start import release_store, store_free_while_waiting
from toolwire.run.steps import StepRunner, direct_step
from toolwire.tools.executor import OutputBudget, ToolOutcome, run_call

__all__ = [
    "AGENT_LOOP_DETECTED",
    "AGENT_MAX_ITERATIONS",
    "AGENT_PARSER_ERROR",
    "AgentResult",
    "AgentState",
    "StepOutcome",
    "agent_step",
    "finish_agent_run",
    "render_first_request",
    "run_agent",
    "start_agent",
]

AGENT_MAX_ITERATIONS = "AGENT_MAX_ITERATIONS"
TOOL_CHOICE = "auto"  # seed 001: with tools the model may call them or answer
# Transports whose errors are plain results (seed 003): no repair budget applies.
_NO_REPAIR_BUDGET = frozenset({"xct"})


@dataclass
class AgentResult:
    run_id: str
    status: str  # "ok" | "unchecked" | "Failed" (agent.checks.run_outcome)
    error_code: str | None
    error_message: str | None
    final_report: FinalReport | None
    turns: int
    attempts: list[Attempt]
    tool_calls: list[dict[str, Any]]
    report_path: Path | None = None
    progress: list[str] = field(default_factory=list)
    # Shape shared with the librarian's RunResult, so one CLI summary prints both.
    outcomes: list[OperationOutcome] = field(default_factory=list)
    diff: str = ""
    commit_sha: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class AgentState:
    """The run so far; mutated by each step, read by ``finish_agent_run``."""

    adapter: TransportAdapter | None
    ledger: ToolLedger
    turn: int = 0  # current turn, 0-based
    attempt: int = 0  # attempts already made in this turn
    iterations: int = 0  # model calls so far
    attempts: list[Attempt] = field(default_factory=list)
    final: FinalReport | None = None
    last_error: ProtocolError | None = None
    progress: list[str] = field(default_factory=list)
    guard: LoopGuard = field(default_factory=LoopGuard)
    compactions: int = 0  # most messages a request has had compacted so far
    succeeded: list[ToolOutcome] = field(default_factory=list)  # quoted by the final report
    # (tool, path) of read-only calls whose result the model has (agent.grammar_tools)
    had: set[tuple[str, str]] = field(default_factory=set)
    writes: WriteTargets | None = None  # where the run may write (agent.write_targets)


@dataclass(frozen=True)
class StepOutcome:
    usable: bool
    final: FinalReport | None
    error: ProtocolError | None
    stop: ToolwireError | None = None  # the run must end (AGENT_LOOP_DETECTED)


def start_agent(ctx: AgentContext) -> AgentState:
    """The transport adapter with its opening messages, and an empty ledger."""
    spec = ctx.spec
    report_spec = spec.final_report
    setup = AgentSetup(
        transport=ctx.transport,
        pack=ctx.pack,
        goal=spec.goal,
        tools=ctx.tools,
        final_format=report_spec.format if report_spec else "text",
        final_schema=report_spec.schema_ if report_spec else None,
        max_calls_per_turn=ctx.constraints.max_tool_calls_per_turn,
        constraint=ctx.constraint,
        tools_in_prompt=ctx.tools_in_prompt,
    )
    return AgentState(
        adapter=make_adapter(setup),
        ledger=ToolLedger(ctx.transport),
        writes=WriteTargets(ctx.workspace_root, spec.goal),
    )


def _shaped_tools(ctx: AgentContext, state: AgentState) -> list[Any]:
    """The tools as the next grammar shapes them (``agent.grammar_tools``)."""
    return grammar_tools(
        ctx.tools.tools,
        ctx.workspace_root,
        exclude=state.guard.blocked,
        had=state.had,
        writable=state.writes.writable_names() if state.writes else [],
    )


def _request(
    ctx: AgentContext, state: AgentState, *, only: Any | None = None
) -> tuple[CompletionRequest, str]:
    """The next completion request and its id (``{{request_id}}`` in replay scripts);
    ``only``: the one tool the grammar offers (chosen by ``agent.first_tool``)."""
    assert state.adapter is not None, "start_agent runs first"
    if ctx.use_grammar:  # paths that exist, no tool the model just repeated
        state.adapter.grammar_tools = [only] if only is not None else _shaped_tools(ctx, state)
        # A report before any tool ran is grounded in nothing: the first answers call.
        state.adapter.require_call = not state.ledger.ran_a_tool
        # The last model call, once a tool has run, finishes: a call made there would
        # return a result no model call reads, and the run would end without a report.
        state.adapter.require_final = (
            state.ledger.ran_a_tool and state.iterations + 1 >= ctx.constraints.max_iterations
        )
    parts = state.adapter.request()
    cfg = ctx.model_cfg
    request_id = f"{ctx.run_id[:8]}-{state.turn + 1:03d}-{state.attempt}"
    tools_tokens = _estimate_tokens(parts.tools) if parts.tools else 0
    budget = ctx.constraints.context_window_tokens - cfg.max_tokens - tools_tokens
    messages = parts.messages
    if ctx.transport not in _NO_REPAIR_BUDGET:  # xct's replies are one JSON object each
        messages = _task_last(messages, ctx.spec.goal)
    compacted = compact_messages(messages, budget)
    state.compactions = max(state.compactions, compacted.count)
    request = CompletionRequest(
        messages=compacted.messages,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        grammar=parts.grammar if ctx.constraint == "grammar" else None,
        tools=parts.tools,
        json_schema=parts.json_schema if ctx.constraint == "json_schema" else None,
        strict_tools=ctx.constraint == "json_schema" and bool(parts.tools),
        tool_choice=TOOL_CHOICE if parts.tools else None,
        variables={"request_id": request_id, **parts.variables},
    )
    return request, request_id


def _task_last(messages: list[Any], goal: str) -> list[Any]:
    """The messages with the task restated at the end of the last user message, when
    it is not there already: a small model reads what comes last (results, XML-NEXT's
    instructions) and loses a task stated only at the start."""
    last = messages[-1] if messages else None
    if last is None or last.get("role") != "user" or not isinstance(last.get("content"), str):
        return messages
    line = f"Task: {goal}"
    if last["content"].rstrip().endswith(line):
        return messages
    return [*messages[:-1], {**last, "content": f"{last['content'].rstrip()}\n\n{line}"}]


def render_first_request(ctx: AgentContext) -> CompletionRequest:
    """The first request of a run exactly as it would be sent (for ``toolwire render``)."""
    return _request(ctx, start_agent(ctx))[0]


def render_side_request(ctx: AgentContext) -> CompletionRequest | None:
    """The first-tool side request a grammar run sends before its first request
    (``agent.first_tool``), or None when it sends none (``toolwire render``)."""
    return _side_request(ctx, start_agent(ctx))[1] if ctx.use_grammar else None


def _side_request(
    ctx: AgentContext, state: AgentState
) -> tuple[list[Any], CompletionRequest | None]:
    """The tools as the grammar shapes them, and the side request that picks one of
    them (None when there is nothing to choose)."""
    shaped = _shaped_tools(ctx, state)
    request = choice_request(
        shaped, ctx.tools.tools, ctx.spec.goal, temperature=ctx.model_cfg.temperature
    )
    return shaped, request


def _raw_text(completion: Completion) -> str:
    """What the model wrote: the text, plus native tool calls as JSON when there are any."""
    if not completion.tool_calls:
        return completion.text
    calls = [{"id": c.id, "name": c.tool, "arguments": c.args} for c in completion.tool_calls]
    return json.dumps({"content": completion.text, "tool_calls": calls}, ensure_ascii=False)


def _estimate_tokens(value: object) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return estimate_tokens(text)


def _output_budget(ctx: AgentContext, request: CompletionRequest, completion: Completion) -> int:
    """Characters of tool output the next request can still hold (about 4 per token).

    The next request compacts what is old by then (``agent.history``), so what
    it needs at least is this history compacted, plus this answer.
    """
    used = (
        compacted_floor(request.messages)
        + (_estimate_tokens(request.tools) if request.tools else 0)
        + _estimate_tokens(_raw_text(completion))
        + ctx.model_cfg.max_tokens
    )
    free = ctx.constraints.context_window_tokens - used
    return max(0, int(free * BUDGET_SHARE)) * 4


def _record(ctx: AgentContext, state: AgentState, attempt: Attempt) -> None:
    state.attempts.append(attempt)
    assert ctx.store is not None, "prepare_agent_run opens the store"
    ctx.store.record_attempt(ctx.run_id, attempt)  # durable before anything else happens


def _choose_tool(
    ctx: AgentContext, state: AgentState, call: Callable[[CompletionRequest], Completion]
) -> Any | None:
    """The first call's tool, picked in a short side request (``agent.first_tool``):
    under a grammar, before any tool ran, on the turn's first attempt. The side request
    and its reply are stored as the turn's ``first_tool`` attempt (its own tokens and
    latency) before the transport's request is sent."""
    if not ctx.use_grammar or state.ledger.ran_a_tool or state.attempt > 0:
        return None
    shaped, side_request = _side_request(ctx, state)
    if side_request is None:
        return None
    started = time.time()
    side = call(side_request)
    chosen = read_choice(side.text, shaped)
    request_id = f"{ctx.run_id[:8]}-{state.turn + 1:03d}-{FIRST_TOOL_KIND}"
    _record(
        ctx,
        state,
        choice_attempt(
            turn=state.turn,
            request_id=request_id,
            request=side_request,
            reply=side,
            raw_text=_raw_text(side),
            chosen=chosen,
            started_at=started,
        ),
    )
    return chosen


def agent_step(
    ctx: AgentContext, state: AgentState, call: Callable[[CompletionRequest], Completion]
) -> StepOutcome:
    """One model call and everything it leads to: parse, store, run tools, feed back."""
    adapter = state.adapter
    assert adapter is not None, "start_agent runs first"
    chosen = _choose_tool(ctx, state, call)  # a grammar run's first turn: its own attempt
    started = time.time()
    request, request_id = _request(ctx, state, only=chosen)
    completion = call(request)
    state.iterations += 1  # the side request and this one are one iteration
    shown, parsed = read_completion(adapter, completion)
    if not parsed.usable and parsed.error is None:
        parsed.error = protocol_error(
            AGENT_NO_ACTION, "No tool call could run and there was no final report."
        )
    guard, seen_at = state.guard, {"turn": state.turn, "compactions": state.compactions}
    repeated = False
    if not parsed.usable:
        # The answer as written, call ids aside (a provider numbers them afresh each time).
        written = json.dumps(
            [completion.text, [(c.tool, c.args) for c in completion.tool_calls]], default=str
        )
        error = guard.check_answer(written, parsed.error, **seen_at)
        repeated = error is not parsed.error
        parsed.error = error
    attempt = Attempt(
        turn=state.turn,
        attempt=state.attempt,
        kind="initial" if state.attempt == 0 else "repair",
        request_id=request_id,
        prompt=request.messages,
        raw_text=_raw_text(completion),
        parse_ok=parsed.usable,
        error_code=None if parsed.usable else parsed.error.code if parsed.error else None,
        error_codes=parsed.error_codes(),
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        latency_ms=completion.latency_ms,
        finish_reason=completion.finish_reason,
        started_at=started,
    )
    _record(ctx, state, attempt)  # durable before any tool runs

    budget = OutputBudget(_output_budget(ctx, request, completion))
    outcomes = [
        (state.writes and state.writes.refusal(call, ctx.tools))
        or run_call(ctx.tools, call, budget=budget)
        for call in parsed.calls
    ]
    if outcomes:
        outcomes, repeated = guard.check_outcomes(outcomes, **seen_at)
    for outcome in outcomes:
        state.ledger.add_outcome(state.turn, outcome)
        if outcome.status == "success":
            state.succeeded.append(outcome)
            note_had(state.had, ctx.tools.tools, outcome)
    for item in parsed.rejected:
        state.ledger.add_rejected(state.turn, item)
    if parsed.final_source is not None:
        state.ledger.add_final(
            state.turn,
            source=parsed.final_source,
            payload_bytes=parsed.final_bytes,
            report=parsed.final,
            error=None if parsed.final is not None else parsed.error,
            slot=parsed.final_slot,
        )
    adapter.record(shown, parsed, outcomes)
    if parsed.progress:
        state.progress.append(parsed.progress)

    if parsed.usable:
        state.turn += 1
        state.attempt = 0
        state.last_error = None
    else:
        state.attempt += 1
        state.last_error = parsed.error
    if parsed.final is not None:
        state.final = parsed.final
    stop = guard.end_turn(repeated) if parsed.final is None else None
    return StepOutcome(usable=parsed.usable, final=parsed.final, error=parsed.error, stop=stop)


def finish_agent_run(
    ctx: AgentContext, *, status: str, error: ToolwireError | None, state: AgentState
) -> AgentResult:
    """Write the report and the run's final rows (tool calls included) in one transaction."""
    assert ctx.store is not None, "prepare_agent_run opens the store"
    result = AgentResult(
        run_id=ctx.run_id,
        status=status,
        error_code=error.code if error else None,
        error_message=error.message if error else None,
        final_report=state.final,
        # A turn is a try at an answer: a side request alone (the provider failed after
        # it) is not one, as in repair_stats.
        turns=len({a.turn for a in state.attempts if a.kind != FIRST_TOOL_KIND}),
        attempts=list(state.attempts),
        tool_calls=list(state.ledger.rows),
        progress=list(state.progress),
    )
    record_run_end(ctx, result, render_agent_report(ctx, result), tool_calls=result.tool_calls)
    return result


def _repairs_exhausted(ctx: AgentContext, state: AgentState) -> bool:
    if ctx.transport in _NO_REPAIR_BUDGET:
        return False
    return state.attempt > ctx.constraints.max_repair_retries


def run_agent(
    ctx: AgentContext,
    *,
    call: Callable[[CompletionRequest], Completion] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    step: StepRunner = direct_step,
) -> AgentResult:
    """The whole run. ``on_turn(calls_made, max_iterations)`` after each model call.

    The run's hold on the store file (taken by ``prepare_agent_run``) ends here, however
    the run ends; a model call that is not a replay lets go of it meanwhile."""
    assert ctx.provider is not None, "prepare_agent_run opens the provider"
    try:
        model_call = store_free_while_waiting(ctx, call or ctx.provider.complete)
        return _run_agent_steps(ctx, model_call, on_turn, step)
    finally:
        release_store(ctx)


def _run_agent_steps(
    ctx: AgentContext,
    model_call: Callable[[CompletionRequest], Completion],
    on_turn: Callable[[int, int], None] | None,
    step: StepRunner,
) -> AgentResult:
    """``run_agent`` without the store release."""
    state = AgentState(adapter=None, ledger=ToolLedger(ctx.transport))
    limit = ctx.constraints.max_iterations

    def end(status: str, error: ToolwireError | None) -> AgentResult:
        return step(
            "finish",
            lambda: finish_agent_run(ctx, status=status, error=error, state=state),
        )

    try:
        state = step("start", start_agent, ctx)
        while state.iterations < limit:
            name = f"turn-{state.turn + 1}" + (f"-repair-{state.attempt}" if state.attempt else "")
            outcome = step(name, agent_step, ctx, state, model_call)
            if on_turn:
                on_turn(state.iterations, limit)
            if outcome.final is not None:
                state.final = with_quotes(outcome.final, state.succeeded)
                # The model says it is done; the spec's checks say whether it is (none:
                # `unchecked`, never `ok`).
                status, failed = run_outcome(ctx.spec.checks, ctx.workspace_root, state.final)
                return end(status, failed)
            if outcome.stop is not None:
                return end("Failed", outcome.stop)
            if not outcome.usable and _repairs_exhausted(ctx, state):
                return end("Failed", state.last_error)
        stop = ToolwireError(
            f"no final report after {limit} model calls (constraints.max_iterations)",
            code=AGENT_MAX_ITERATIONS,
        )
        return end("Failed", stop)
    except ProviderError as exc:
        return end("Failed", exc)
    except ToolwireError as exc:
        end("Failed", exc)
        raise
