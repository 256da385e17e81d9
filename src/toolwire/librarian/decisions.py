"""The scorer's side of a librarian run: every note judged (``judge_notes``), the notes
whose decision the run must act on (incremental runs, ``store.evidence``), a model's
topic held to the scorer's rule (``never_worse``), and what the run leaves for the next
one (``remember_evidence``).
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolwire.domain import LibrarianResponse
from toolwire.embedder import Embedder
from toolwire.errors import ToolwireError
from toolwire.librarian.answer import file_name_title
from toolwire.librarian.context import RunContext, RunResult
from toolwire.librarian.journal.reverted import left_by_runs, taken_back
from toolwire.librarian.judge import scorer as _judge
from toolwire.librarian.judge.scorer import (
    NoteEvidence,
    NoteJudgement,
    TopicScorer,
    decide,
    in_question_order,
)
from toolwire.librarian.notes.fields import MAX_TITLE_CHARS
from toolwire.librarian.notes.workspace import Note, Workspace, sha256_hex
from toolwire.librarian.review import NOT_A_TOPIC, left_as_is
from toolwire.librarian.summary import current_topic
from toolwire.spec.model import Judgement
from toolwire.store import Store
from toolwire.store.evidence import (
    CachingEmbedder,
    DecisionLedger,
    NoteRecord,
    RunCosts,
    decision_key,
    embedder_id,
    evict_unused_embeddings,
    record_run_costs,
)
from toolwire.store.review import answers_given

__all__ = [
    "evidence_after_apply",
    "judge_notes",
    "load_embedder",
    "notes_to_work_on",
    "never_worse",
    "remember_evidence",
    "scorer_title",
]


# judge_notes (the scorer's) loads its embedder through this module's ``load_embedder``:
# while a run is being judged, that puts the run's store-backed cache in front of it.
_RUN_BEING_JUDGED: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "toolwire_run_being_judged", default=None
)


def load_embedder(name: str) -> Embedder | None:
    """``judge.load_embedder``; inside ``build_requests`` of a run with a store, cached
    by text in the store (``store.evidence.CachingEmbedder``)."""
    inner = _judge.load_embedder(name)
    ctx = _RUN_BEING_JUDGED.get()
    if inner is None or ctx is None or not isinstance(ctx.store, Store):
        return inner
    ctx.embedder = CachingEmbedder(inner, ctx.store, read=not ctx.full)
    return ctx.embedder


def notes_to_work_on(ctx: RunContext, workspace: Workspace) -> list[Any]:
    """Judge every note (``ctx.judgements``), embedding through the run's store-backed
    cache, and return the notes whose decision this run must act on; a line for the
    notes an earlier run deferred that still wait goes to ``ctx.warnings``."""
    token = _RUN_BEING_JUDGED.set(ctx)
    try:
        ctx.judgements = judge_notes(ctx, workspace)
    finally:
        _RUN_BEING_JUDGED.reset(token)
    work, left = _changed_decisions(ctx, workspace)
    waiting = _still_deferred(ctx, left)
    ctx.warnings += [waiting] if waiting else []
    return work


def _changed_decisions(ctx: RunContext, workspace: Workspace) -> tuple[list[Any], set[str]]:
    """The notes whose decision this run must act on, and the ids of those the user asked
    to be left as they are; sets ``ctx.evidence``/``costs``.

    Every note's judgement is recomputed from cached embeddings (cheap: numpy). A note
    is *worked on* when its decision key changed (its bytes, the spec, the prompt pack,
    the embedder or model, or which notes are the user's examples of which topic) or
    its decision did (another note's new text or self-training can move it), or on
    ``--full``. Any other note is left as the run that decided it left it: no request,
    no model call, no row."""
    topics = ctx.taxonomy.topics
    shas = {n.note_id: hashlib.sha256(n.raw).hexdigest() for n in workspace.notes.values()}
    # The user's examples by note and topic: an example whose text changed is re-embedded
    # (by text), and a decision it moves is caught by the comparison below.
    unconfirmed = runs_own_topics(ctx, workspace)
    examples = [
        (n.note_id, topic)
        for n in workspace.notes.values()
        if (topic := current_topic(n, topics)) is not None and n.note_id not in unconfirmed
    ]
    judgement = ctx.loaded.spec.judgement or Judgement()
    inputs = DecisionLedger.inputs_fingerprint(
        spec_hash=ctx.loaded.hash,
        embedder=embedder_id(ctx.embedder.inner) if ctx.embedder else judgement.embedder,
        model=f"{ctx.model_cfg.provider}:{ctx.model_cfg.name}|{ctx.pack.pack_hash}",
        examples=examples,
    )
    ledger = _ledger(ctx)
    ctx.previous = ledger.load() if ledger is not None else {}
    ctx.decision_inputs = inputs
    left = _left_as_the_user_asked(ctx)
    paths = {n.path: shas[n.note_id] for n in workspace.notes.values()}
    given_back = taken_back(ctx.workspace_root, paths)
    work, kept = [], []
    left_ids: set[str] = set()
    for note in workspace.notes.values():
        j = ctx.judgements.get(note.note_id)
        sha = shas[note.note_id]
        record = NoteRecord(
            sha,
            decision_key(sha, inputs),
            j.decision if j else "none",
            j.best.topic if j and j.candidates else None,
        )
        ctx.evidence[note.note_id] = record
        if (note.path, sha) in left or note.path in given_back:  # even with --full
            kept.append(note.path)
            left_ids.add(note.note_id)
        elif ctx.full or ctx.previous.get(note.note_id) != record:
            work.append(note)
    ctx.left_alone = set(kept)
    if kept:
        more = f" and {len(kept) - 3} more" if len(kept) > 3 else ""
        shown = ", ".join(sorted(kept)[:3]) + more
        ctx.warnings.append(
            f"{len(kept)} note(s) left as you asked (toolwire undo, 'leave it' in toolwire "
            f"review, or a run's change you took back by hand) until they change: {shown}"
        )
    embedded = ctx.embedder
    ctx.costs = RunCosts(
        notes=len(workspace.notes),
        texts_embedded=embedded.misses if embedded else 0,
        embedding_hits=embedded.hits if embedded else 0,
        decisions_recomputed=len(work),
        decisions_reused=len(workspace.notes) - len(work),
        full_pass=ctx.full,
    )
    return work, left_ids


def _left_as_the_user_asked(ctx: RunContext) -> set[tuple[str, str]]:
    """Note bytes the user asked to be left as they are: answered "leave it" (``d``) in
    ``toolwire review``, or restored by ``toolwire undo`` of a run's change. A run changes
    no such note (no retag, no title) until its bytes change: otherwise the next run
    would quietly write back what the user just undid. (path, sha256) pairs: the note and
    its bytes, wherever the vault is mounted; an undo also counts through the journal
    (``taken_back``), which moves with the vault and is written first."""
    if not isinstance(ctx.store, Store):
        return set()
    return left_as_is(answers_given(ctx.store))


def evidence_after_apply(ctx: RunContext, workspace: Workspace, changes: Sequence[Any]) -> None:
    """Record each note this run wrote with the bytes it left (``FileChange.new_sha256``),
    not the bytes it judged: the decision holds for the note as the run left it. A note
    later given back its old bytes some other way than ``toolwire undo`` (a fresh copy,
    a restore from backup) is then decided again, instead of passing as already done."""
    by_path = {n.path: n.note_id for n in workspace.notes.values()}
    for change in changes:
        note_id = by_path.get(change.path)
        record = ctx.evidence.get(note_id) if note_id is not None else None
        if record is not None and note_id is not None:
            sha = change.new_sha256
            key = decision_key(sha, ctx.decision_inputs)
            ctx.evidence[note_id] = replace(record, content_sha256=sha, decision_key=key)


def _ledger(ctx: RunContext) -> DecisionLedger | None:
    if not isinstance(ctx.store, Store):
        return None  # a render context, or a benchmark's stand-in store
    return DecisionLedger(ctx.store, str(ctx.workspace_root))


def runs_own_topics(ctx: RunContext, workspace: Workspace) -> set[str]:
    """Ids of the notes whose topic is a run's word, not the user's: the bytes on disk are
    the ones a librarian run wrote (its journal says so) and no answer in ``toolwire
    review`` chose them. Kept, never an example (issue 41: "never learn from its own
    guesses"); the user's own edit of the note, or an answer, makes the topic theirs."""
    shas = {n.path: sha256_hex(n.raw) for n in workspace.notes.values()}
    written = left_by_runs(ctx.workspace_root, shas)
    if not written:
        return set()
    answered: set[tuple[str, str]] = set()  # (path, bytes): wherever the vault is mounted
    if isinstance(ctx.store, Store):
        answered = {
            (a.note_path, a.answer_sha256)
            for a in answers_given(ctx.store)
            if a.answer != NOT_A_TOPIC
        }
    return {
        n.note_id
        for n in workspace.notes.values()
        if n.path in written and (n.path, shas[n.path]) not in answered
    }


def scorer_title(note: Note) -> str:
    """The title the scorer reads: none when it is the one toolwire derives from the
    file name (a scorer-decided run writes it into an untitled note's front matter).
    The head already holds the file name's words, and reading them again would make
    toolwire's own write change the note's embedded text: every note it titled was
    embedded again by the next run (issue 43)."""
    if note.title and note.title == file_name_title(note.path, note.body)[:MAX_TITLE_CHARS]:
        return ""
    return note.title


def judge_notes(ctx: RunContext, workspace: Workspace) -> dict[str, NoteJudgement]:
    """The scorer's candidates and the keep/retag/defer decision for every note."""
    spec = ctx.loaded.spec
    topics = list(ctx.taxonomy.topics)
    judgement = spec.judgement or Judgement()
    unconfirmed = runs_own_topics(ctx, workspace)
    evidence = [
        NoteEvidence(
            n.note_id,
            n.path,
            scorer_title(n),
            n.body,
            current_topic(n, topics),
            confirmed=n.note_id not in unconfirmed,
        )
        for n in workspace.notes.values()
    ]
    # The scorer reports the embedding's progress (it took minutes with nothing on screen).
    embedder = load_embedder(judgement.embedder)
    scorer = TopicScorer(topics, ctx.taxonomy.descriptions, embedder)
    judged = [
        decide(note, candidates, min_confidence=float(ctx.constraints.min_confidence))
        for note, candidates in zip(evidence, scorer.score(evidence), strict=True)
    ]
    return {j.note_id: j for j in in_question_order(evidence, judged, scorer)}


def _still_deferred(ctx: RunContext, left: set[str]) -> str | None:
    """One line for the notes deferred by an earlier run that this run did not work on
    (nothing about them changed): they still wait. One line, not one per note: a
    nightly run must not store and print the same hundreds of notes every night."""
    if ctx.full or "defer" not in ctx.constraints.allowed_kinds:
        return None
    waiting = sorted(
        note_id
        for note_id, record in ctx.previous.items()
        if record.decision == "defer"
        and ctx.evidence.get(note_id) == record
        and note_id not in left  # not asked again: the user answered
    )
    if not waiting:
        return None
    shown = ", ".join(waiting[:3]) + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else "")
    return (
        f"{len(waiting)} note(s) still deferred from earlier runs, unchanged since: {shown} "
        "(toolwire review asks about them)"
    )


def remember_evidence(ctx: RunContext, result: RunResult) -> None:
    """Store what the run computed and reused, and, after a run that ended ``ok`` and
    wrote its changes, each note's decision record (so the next run skips what did not
    change). A dry or failed run changed nothing: its notes are still to be worked on.
    The cached embeddings the run read are marked used today. After an ok run, raw texts
    of ok runs older than the last ``keep_raw_runs`` go, and so do cached embeddings
    unused for more than ``keep_embeddings_days``."""
    if not isinstance(ctx.store, Store):
        return
    try:
        record_run_costs(ctx.store, ctx.run_id, ctx.costs)
        if ctx.embedder is not None:
            ctx.embedder.mark_used()
        if result.ok and not ctx.dry_run and ctx.loaded.spec.judgement is not None:
            DecisionLedger(ctx.store, str(ctx.workspace_root)).save(
                ctx.run_id, ctx.evidence, ctx.previous
            )
        if result.ok:
            ctx.store.prune_raw_texts(ctx.keep_raw_runs)
            evict_unused_embeddings(ctx.store, ctx.keep_embeddings_days)
    except ToolwireError as exc:  # the run itself is stored; the next one recomputes more
        warning = f"per-note evidence not stored ({exc.message}); the next run recomputes it"
        result.warnings.append(warning)
        ctx.store.record_warnings(ctx.run_id, [warning])


def never_worse(ctx: RunContext, response: LibrarianResponse) -> LibrarianResponse:
    """A topic the model chose (``decide: model``) is held to the scorer's rule: a note
    that has a topic keeps it (the user's topic is never replaced on the run's own)."""
    judgement = ctx.loaded.spec.judgement or Judgement()
    if judgement.decide != "model":
        return response
    kept = []
    for op in response.operations:
        j = ctx.judgements.get(op.target_note_id or "")
        if op.kind == "retag_note" and j is not None:
            chosen = [c for c in j.candidates if c.topic == op.body_markdown]
            again = decide(
                NoteEvidence(j.note_id, "", "", "", j.current),
                chosen + [c for c in j.candidates if c.topic != op.body_markdown],
                min_confidence=0.0,  # min_confidence is validation's: it defers
            )
            if again.decision != "retag":
                continue
        kept.append(op)
    return replace(response, operations=tuple(kept))
