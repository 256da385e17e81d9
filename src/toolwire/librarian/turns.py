"""One librarian request's turn: the model call with its bounded repairs (``run_turn``),
or the system's own answer when nothing is left for the model, then every proposed
operation checked against the spec, the notes and earlier turns (``validate_turn``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from toolwire.domain import (
    Attempt,
    Completion,
    CompletionRequest,
    LibrarianResponse,
    Message,
    OperationOutcome,
)
from toolwire.errors import LIBRARIAN_PARSE_FAILED, ProtocolError
from toolwire.librarian.answer import conform
from toolwire.librarian.context import RunContext
from toolwire.librarian.decisions import never_worse
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.repair import TurnOutcome, format_errors_for_repair, run_turn_with_repair
from toolwire.librarian.turn_requests import TurnRequest
from toolwire.librarian.validate import planned_view, validate_operations
from toolwire.promptpack.pack import render_stage
from toolwire.protocols.attrless import parse_response
from toolwire.run.start import store_free_while_waiting

__all__ = ["run_turn", "validate_turn"]


def _parse_for(ctx: RunContext, request_id: str) -> Callable[[Completion], LibrarianResponse]:
    strict = bool(ctx.constraints.strict_mode)

    def parse(completion: Completion) -> LibrarianResponse:
        response = parse_response(completion.text, strict=strict)
        if response.request_id != request_id:
            raise ProtocolError(
                code=LIBRARIAN_PARSE_FAILED,
                message=(
                    f"<request_id> is {response.request_id!r}; answer the request "
                    f"{request_id!r} and copy its request_id exactly."
                ),
                details=["REQUEST_ID_MISMATCH"],
            )
        return response

    return parse


def run_turn(
    ctx: RunContext,
    tr: TurnRequest,
    call: Callable[[CompletionRequest], Completion] | None = None,
) -> TurnOutcome[LibrarianResponse]:
    """Call the model for one request, repairing at most ``max_repair_retries`` times."""
    cfg = ctx.model_cfg

    def attempt_is_first(messages: list[Message]) -> bool:
        return messages is tr.messages  # a repair asks anew, without the template

    def make_request(messages: list[Message]) -> CompletionRequest:
        return CompletionRequest(
            messages=messages,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            grammar=tr.grammar,
            template=tr.template if attempt_is_first(messages) else None,
            variables={"request_id": tr.request_id},
        )

    def repair_messages(error: ProtocolError, original: str) -> list[Message]:
        bindings = {"errors": format_errors_for_repair(error), "original_response": original}
        return render_stage(ctx.pack, "validate_repair", bindings)

    if tr.template is not None and all(isinstance(p, str) for p in tr.template):
        return _answer_without_model(ctx, tr)
    return run_turn_with_repair(
        turn=tr.turn,
        request_id=tr.request_id,
        first_messages=tr.messages,
        call=store_free_while_waiting(ctx, call or ctx.opened_provider.complete),
        make_request=make_request,
        parse=_parse_for(ctx, tr.request_id),
        repair_messages=repair_messages,
        max_repairs=ctx.constraints.max_repair_retries,
        on_attempt=lambda attempt: ctx.opened_store.record_attempt(ctx.run_id, attempt),
    )


def _answer_without_model(ctx: RunContext, tr: TurnRequest) -> TurnOutcome[LibrarianResponse]:
    """A request whose answer has no slot: the answer is the template, written by the
    system. Stored as the turn's attempt (no prompt: nothing was sent), never parsed
    back: ``validate_turn`` takes every operation from the plan (``conform``)."""
    assert tr.template is not None
    started = time.time()
    text = "".join(p for p in tr.template if isinstance(p, str))
    attempt = Attempt(
        turn=tr.turn,
        attempt=0,
        kind="initial",
        request_id=tr.request_id,
        prompt=[],
        raw_text=text,
        parse_ok=True,
        error_code=None,
        error_codes=(),
        input_tokens=0,
        output_tokens=0,
        latency_ms=(time.time() - started) * 1000.0,
        finish_reason="stop",
        started_at=started,
    )
    ctx.opened_store.record_attempt(ctx.run_id, attempt)
    response = LibrarianResponse(tr.request_id, "ok", "", (), ())
    return TurnOutcome(value=response, error=None, attempts=(attempt,))


def validate_turn(
    ctx: RunContext,
    workspace: Workspace,
    tr: TurnRequest,
    response: LibrarianResponse,
    prior: list[OperationOutcome],
) -> list[OperationOutcome]:
    """Check every proposed operation against the spec, the workspace and earlier turns.

    ``max_operations`` applies per request (the request tells the model its
    limit); ``prior`` lets a later turn see changes planned by earlier ones.
    The run keeps that planned view from turn to turn (``ctx.planned``), so a
    turn costs its own operations, not a replay of every earlier turn.
    """
    constraints = ctx.constraints
    if tr.template is not None:
        # Only this turn's notes: a copy of every note's text per turn made runs quadratic.
        texts = {}
        for note_id in tr.note_ids:
            note = workspace.notes.get(note_id)
            if note is not None:
                texts[note_id] = f"{note.path} {note.body}"
        response = never_worse(ctx, conform(response, tr.plan, texts))
        if not tr.messages:  # the system's own answer: max_operations caps a model's
            constraints = constraints.model_copy(update={"max_operations": len(tr.plan)})
    held = ctx.planned
    if held is not None and held[0] is workspace and held[1] == len(prior):
        before = held[2]
    else:  # first turn, or a caller that validates out of order: replay what came before
        before = planned_view(workspace, prior)
        if before is workspace:
            before = _copy(workspace)
    # The running view is this run's own copy, updated in place turn after turn (linear in
    # the changes, not a copy of the workspace per change). A turn whose planned rewrite
    # may be refused afterwards (a note shown cut) works on a copy, so the refused change
    # never enters the view.
    may_refuse = bool(tr.truncated_ids) and bool(
        {"rewrite_note", "relink_note"} & set(constraints.allowed_kinds)
    )
    view = _copy(before) if may_refuse else before
    outcomes = validate_operations(
        response,
        view,
        turn=tr.turn,
        constraints=constraints,
        topics=ctx.taxonomy.topics,
        ops_so_far=0,
        seq_start=len(prior),
        in_place=True,
        planned_by="scorer" if tr.template is not None else "model",
    )
    # A note shown truncated must not be rewritten from its visible half.
    checked = []
    for outcome in outcomes:
        op = outcome.operation
        if (
            outcome.status == "planned"
            and op.kind in ("rewrite_note", "relink_note")
            and op.target_note_id in tr.truncated_ids
        ):
            outcome = replace(
                outcome,
                status="rejected",
                code="NOTE_TRUNCATED_IN_REQUEST",
                detail="the request showed only part of this note; a rewrite would drop the rest",
            )
        checked.append(outcome)
    if may_refuse:
        view = planned_view(before, checked)
    ctx.planned = (workspace, len(prior) + len(checked), view)
    return checked


def _copy(workspace: Workspace) -> Workspace:
    return Workspace(
        workspace.root, workspace.notes, workspace.warnings, conventions=workspace.conventions
    )
