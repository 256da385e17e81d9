"""A librarian run's requests, each rendered exactly as it will be sent: the one the
system answers itself (every operation the scorer decided) and one per batch of notes
whose answer has slots for the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from toolwire.domain import AnswerTemplate, Message
from toolwire.errors import UsageError
from toolwire.librarian.answer import (
    PlannedOperation,
    file_name_title,
    plan_operations,
    render_template,
    template_gbnf,
)
from toolwire.librarian.batching import plan_batches
from toolwire.librarian.context import RunContext
from toolwire.librarian.decisions import notes_to_work_on
from toolwire.librarian.notes.workspace import Workspace
from toolwire.memory import profile_block
from toolwire.memory.tokens import estimate_tokens
from toolwire.promptpack.pack import render_stage
from toolwire.protocols.attrless import LibrarianRequest, Source, librarian_grammar, render_request
from toolwire.spec.model import Constraints, Judgement

__all__ = ["TurnRequest", "build_requests"]


# Answer + system prompt + envelope reserve when splitting notes into requests.
ENVELOPE_RESERVE_TOKENS = 200

MAX_TITLE_CHARS_SHOWN = 200


@dataclass(frozen=True)
class TurnRequest:
    turn: int
    request_id: str
    request_xml: str
    messages: list[Message]
    grammar: str | None
    note_ids: tuple[str, ...]
    truncated_ids: frozenset[str]
    # The answer as planned (answer.py): the model fills only its slots.
    plan: tuple[PlannedOperation, ...] = ()
    template: AnswerTemplate | None = None


def _request_constraints(constraints: Constraints) -> tuple[tuple[str, str], ...]:
    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return (
        ("strict_mode", text(constraints.strict_mode)),
        ("max_operations", text(constraints.max_operations)),
        ("allow_delete", text(constraints.allow_delete)),
        ("allowed_kinds", " ".join(constraints.allowed_kinds)),
        ("min_confidence", text(constraints.min_confidence)),
    )


def build_requests(ctx: RunContext, workspace: Workspace) -> list[TurnRequest]:
    """The run's requests: first, one request the system answers itself (every operation
    the scorer decided, no model call), then one request per batch of notes whose answer
    has slots for the model, each rendered exactly as it will be sent.

    With a judgement block the run is incremental (``store.evidence``): a note whose
    bytes, spec, embedder, model and examples are as at its last decision, and whose
    decision comes out the same, is not worked on again."""
    spec = ctx.loaded.spec
    propose = ctx.pack.stages["propose"]
    # Seed 004: the user's profile and past undos shape the request ("" when none). It is
    # data beside the request, never part of <goal>: a profile is text a model once wrote.
    user_ctx = profile_block(ctx.store, ctx.user_id) if ctx.store is not None else ""
    reserve = (
        ENVELOPE_RESERVE_TOKENS
        + estimate_tokens(propose.system_prompt + propose.user_prompt_template + user_ctx)
        + ctx.model_cfg.max_tokens
    )
    # Without a judgement block the model decides everything, as before (the envelope
    # under the plain librarian grammar); with one, the scorer plans the answer.
    judgement = spec.judgement
    model_notes = list(workspace.notes.values())
    requests: list[TurnRequest] = []
    derived: dict[str, str] | None = None
    if judgement is not None:
        work = notes_to_work_on(ctx, workspace)  # judges every note (decisions.judge_notes)
        # A title only in a vault that keeps a title property (issue 42: elsewhere the
        # file name is the title). A 135M model refuses every title (NOTES.md), so a
        # scorer-decided run takes it from the file name, checked against the note.
        if judgement.decide == "scorer":
            derived = {n.note_id: file_name_title(n.path, n.body) for n in work if not n.title}
        model_notes, system_plan = [], []
        for note in work:
            ops = _plan(ctx, [(note.note_id, note.title)], derived, workspace)
            if any(op.title is None or op.body_markdown is None for op in ops):
                model_notes.append(note)
            else:
                system_plan += ops
        if system_plan:
            requests.append(_system_request(ctx, system_plan))
    ctx.costs.notes_to_model = len(model_notes)
    # A title is never cut by the note budget: cap it here (a 6,000-word title once sent
    # 6,620 tokens against a 2,048-token window).
    notes = [(n.note_id, n.title[:MAX_TITLE_CHARS_SHOWN], n.body) for n in model_notes]
    batches = plan_batches(
        notes,
        batch_size=ctx.constraints.batch_size,
        context_window_tokens=ctx.constraints.context_window_tokens,
        reserved_tokens=reserve,
    )
    use_grammar = ctx.model_cfg.constrain == "grammar" and (
        ctx.provider is None or ctx.opened_provider.supports_grammar
    )
    titles = {n.note_id: n.title for n in model_notes}
    for batch in batches:
        turn = len(requests)
        request_id = f"req_{ctx.run_id[:8]}_{turn + 1:03d}"
        request = LibrarianRequest(
            request_id=request_id,
            goal=spec.goal,
            scope=spec.scope,
            sources=tuple(Source(s.note_id, s.title, s.body) for s in batch),
            topics=tuple(ctx.taxonomy.topics),
            sections=tuple(ctx.taxonomy.sections or ()),
            constraints=_request_constraints(ctx.constraints),
        )
        xml = render_request(request)
        plan: list[PlannedOperation] = []
        template: AnswerTemplate | None = None
        grammar: str | None = None
        if judgement is not None:
            batch_titles = [(s.note_id, titles.get(s.note_id, "")) for s in batch]
            plan = _plan(ctx, batch_titles, derived, workspace)
            template = render_template(request_id, plan)
            grammar = template_gbnf(template) if use_grammar else None
        elif use_grammar:
            grammar = _grammar_or_usage_error(
                librarian_grammar,
                request_id=request_id,
                note_ids=[s.note_id for s in batch],
                topics=ctx.taxonomy.topics,
                allowed_kinds=ctx.constraints.allowed_kinds,
                # One operation per note shown is what a request can use; fewer
                # operations also keep every grammar-admitted answer inside max_tokens.
                max_operations=min(ctx.constraints.max_operations, len(batch)),
                max_tokens=ctx.model_cfg.max_tokens,
            )
        requests.append(
            TurnRequest(
                turn=turn,
                request_id=request_id,
                request_xml=xml,
                messages=render_stage(
                    ctx.pack, "propose", {"request_xml": f"{xml}\n{user_ctx}" if user_ctx else xml}
                ),
                grammar=grammar,
                note_ids=tuple(s.note_id for s in batch),
                truncated_ids=frozenset(s.note_id for s in batch if s.truncated),
                plan=tuple(plan),
                template=template,
            )
        )
    cut = sorted({note_id for r in requests for note_id in r.truncated_ids})
    if cut:
        # One line, not one per note: a short window (the shipped 640 tokens) cuts many.
        shown = ", ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        rewrites = {"rewrite_note", "relink_note"} & set(ctx.constraints.allowed_kinds)
        ctx.warnings.append(
            f"{len(cut)} note(s) shown to the model cut to fit context_window_tokens="
            f"{ctx.constraints.context_window_tokens} (it saw only their start): {shown}"
            + (f"; {' and '.join(sorted(rewrites))} of them are refused" if rewrites else "")
        )
    return requests


def _plan(
    ctx: RunContext,
    notes: list[tuple[str, str]],
    derived: dict[str, str] | None,
    workspace: Workspace,
) -> list[PlannedOperation]:
    judgement = ctx.loaded.spec.judgement or Judgement()
    return plan_operations(
        notes,
        ctx.judgements,
        allowed_kinds=ctx.constraints.allowed_kinds,
        decide=judgement.decide,
        candidates=judgement.candidates,
        # Titles only where the vault keeps a title property (notes.conventions).
        write_titles=judgement.write_titles and workspace.conventions.title == "property",
        derived_titles=derived,
    )[: ctx.constraints.max_operations]


def _system_request(ctx: RunContext, plan: list[PlannedOperation]) -> TurnRequest:
    """The request the system answers itself: every operation fully decided (no slot)."""
    request_id = f"req_{ctx.run_id[:8]}_001"
    plan = [replace(op, operation_id=f"op_{i + 1}") for i, op in enumerate(plan)]
    note_ids = tuple(dict.fromkeys(op.target_note_id for op in plan))
    return TurnRequest(
        turn=0,
        request_id=request_id,
        request_xml=(
            f"<!-- {request_id}: {len(note_ids)} note(s) decided by the scorer; "
            "the model is not asked -->\n"
        ),
        messages=[],
        grammar=None,
        note_ids=note_ids,
        truncated_ids=frozenset(),
        plan=tuple(plan),
        template=render_template(request_id, plan),
    )


def _grammar_or_usage_error(build: Callable[..., str], **kwargs: Any) -> str:
    """The request's grammar; a spec it cannot be built for is the user's to fix."""
    try:
        return build(**kwargs)
    except ValueError as exc:
        raise UsageError(
            f"cannot build the constrained-decoding grammar: {exc} "
            "(raise model.max_tokens, or set model.constrain: none)"
        ) from None
