"""`toolwire review`: the librarian asks the user about the notes it could not decide.

A librarian run's *questions* are its deferred notes (no topic confident enough) and
the notes whose current topic the scorer rates far below another (*misfiled*). At the
end of a run they are stored with the evidence shown (``record_run_questions``); the
review command walks the open ones of the latest run and applies each answer:

- a topic: written with the same front-matter edit a retag uses (``render_changes``),
  through the journal, as a run of its own (``job = 'review'``), so ``runs``, ``show``
  and ``undo`` see it. The note then carries the topic, and a tagged note is an example
  to the scorer in every later run;
- *not a topic*: nothing is written; the note's bytes (sha256) are remembered, and the
  note is asked about again only once its content changes.

Every answer is stored before it is applied, so an apply that is refused (the note
changed, another process holds the workspace) never loses it. A question is *open*
while the note still has the bytes it was asked about and no answer covers its bytes:
undoing an answer's run restores the old bytes, and the question opens again.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from toolwire.domain import Operation, OperationOutcome
from toolwire.errors import StoreError, UsageError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path
from toolwire.files.write_blocker import write_blocker
from toolwire.librarian.journal.write_ahead import apply_plan
from toolwire.librarian.judge.scorer import NoteJudgement
from toolwire.librarian.notes.changes import FileChange, render_changes
from toolwire.librarian.notes.workspace import Workspace, sha256_hex
from toolwire.librarian.summary import field_changes
from toolwire.spec.model import NotesSpec
from toolwire.store import Store
from toolwire.store.review import (
    AnswerRow,
    QuestionRow,
    answers_given,
    latest_librarian_run,
    questions_of_run,
    record_answer,
    record_questions,
)

__all__ = [
    "Answer",
    "AnsweredQuestion",
    "ReviewRound",
    "apply_answer",
    "current_bytes",
    "is_misfiled",
    "left_as_is",
    "load_round",
    "parse_answer",
    "question_rows",
    "record_run_questions",
    "remember_undo",
    "settled_notes",
]

CANDIDATES_KEPT = 5
NOT_A_TOPIC = "not_a_topic"

QuestionState = Literal["open", "answered", "changed", "missing"]


def is_misfiled(j: NoteJudgement) -> bool:
    """The note keeps a topic the scorer rates far below its best candidate (judge.py
    decides and flags it: ``NoteJudgement.misfiled``)."""
    return j.decision == "keep" and j.misfiled


def current_bytes(root: Path, rel: str) -> bytes | None:
    """The note's bytes now; None when it is gone, unreadable or no regular file, or
    when ``rel`` (read from the store) is not a plain path inside the workspace.

    Read through the confined layer, never through a link: a note replaced since the
    run by a symlink out of the workspace (or under a folder swapped for one) was read
    at its target, hashed and shown by the review prompt as the note."""
    try:
        with Confined(root) as fs:
            return fs.read_bytes(normalize_rel_path(rel))
    except (OSError, WorkspaceError):
        return None


def settled_notes(answers: Sequence[AnswerRow]) -> set[tuple[str, str]]:
    """(path, sha256) of the notes the user has already answered for, as the answer left
    them: asking again would waste their time. By note and bytes (issue 45 item 15: by
    bytes alone, a copy of the note elsewhere was silenced too)."""
    return {
        (a.note_path, a.content_sha256 if a.answer == NOT_A_TOPIC else a.answer_sha256)
        for a in answers
    }


def left_as_is(answers: Sequence[AnswerRow]) -> set[tuple[str, str]]:
    """(path, sha256) of the notes the user asked to be left as they are ("leave it",
    ``toolwire undo``): a run changes none of them until its bytes change."""
    return {(a.note_path, a.content_sha256) for a in answers if a.answer == NOT_A_TOPIC}


def question_rows(
    root: Path,
    workspace: Workspace,
    judgements: Mapping[str, NoteJudgement],
    settled: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> list[QuestionRow]:
    """The questions of a run: deferred and misfiled notes, as they are on disk now
    (after the run's own apply), minus those whose bytes the user already answered."""
    rows = []
    for note in sorted(workspace.notes.values(), key=lambda n: n.path):
        j = judgements.get(note.note_id)
        if j is None or not j.candidates:
            continue
        kind = "deferred" if j.decision == "defer" else "misfiled" if is_misfiled(j) else None
        if kind is None:
            continue
        raw = current_bytes(root, note.path)
        if raw is None:  # gone or no longer a regular file since the run read it
            continue
        digest = sha256_hex(raw)
        if (note.path, digest) in settled:
            continue
        candidates = tuple(
            {"topic": c.topic, "confidence": c.confidence, "evidence": c.evidence()}
            for c in j.candidates[:CANDIDATES_KEPT]
        )
        rows.append(
            QuestionRow(
                note_path=note.path,
                note_id=note.note_id,
                content_sha256=digest,
                kind=kind,
                current_topic=j.current,
                candidates=candidates,
                why=j.why,
            )
        )
    return rows


def record_run_questions(
    store: Store,
    run_id: str,
    root: Path,
    workspace: Workspace | None,
    judgements: Mapping[str, NoteJudgement],
) -> list[str]:
    """Store a finished run's questions; returns warnings (a store failure here must not
    fail a run whose notes are already written)."""
    if workspace is None or not judgements:
        return []
    try:
        settled = settled_notes(answers_given(store))
        rows = question_rows(root, workspace, judgements, settled)
        record_questions(store, run_id, str(root), rows)
    except StoreError as exc:
        return [f"the run's questions for `toolwire review` were not stored: {exc.message}"]
    return []


# ------------------------------------------------------------------ a round of questions


@dataclass(frozen=True, slots=True)
class AnsweredQuestion:
    question: QuestionRow
    state: QuestionState


@dataclass
class ReviewRound:
    """The latest librarian run on a workspace, its questions and the spec's topics."""

    run: dict[str, Any]
    root: Path
    topics: list[str]
    questions: list[AnsweredQuestion]
    notes: NotesSpec | None = None  # which files are notes (the spec's globs)

    def load_workspace(self) -> Workspace:
        """The notes as the question run read them (its spec's include/exclude globs)."""
        return Workspace.load(self.root, self.notes)

    @property
    def open(self) -> list[QuestionRow]:
        return [q.question for q in self.questions if q.state == "open"]

    def find(self, path: str) -> AnsweredQuestion:
        """The question about a note: its path in the workspace, its path from here (what
        a shell completes) or an absolute one inside the workspace, or its note id."""
        given = path.strip()
        names = {given.removeprefix("./")}
        try:  # from the current folder, as a shell completes it
            names.add(Path(given).resolve().relative_to(self.root).as_posix())
        except (ValueError, OSError):
            pass
        for q in self.questions:
            if {q.question.note_path, q.question.note_id} & names:
                return q
        raise UsageError(
            f"no question about {path!r} in run {self.run['run_id'][:12]} "
            "(`toolwire review --list` shows them)"
        )


def _spec_of(store: Store, spec_hash: str) -> tuple[list[str], NotesSpec | None]:
    """The question run's topics and which files are notes (its spec, as the store has it)."""
    _, rows = store.query("SELECT canonical_json FROM specs WHERE spec_hash = ?", [spec_hash])
    if not rows:
        raise StoreError(f"the spec {spec_hash[:12]} of the question run is not in the store")
    spec = json.loads(rows[0][0])
    taxonomy = spec.get("taxonomy") or {}
    notes = spec.get("notes")
    return (
        [str(t) for t in taxonomy.get("topics") or []],
        NotesSpec.model_validate(notes) if isinstance(notes, dict) else None,
    )


def load_round(store: Store, workspace: Path | None, run_id: str | None = None) -> ReviewRound:
    """The questions of the latest librarian run (on ``workspace`` when given; or of
    ``run_id``), each with its state now."""
    ws = str(workspace.resolve()) if workspace is not None else None
    if run_id is not None:
        run = store.get_run(run_id)
        if run["job"] != "librarian":
            raise UsageError(f"run {run['run_id'][:12]} is a {run['job']} run, not a librarian run")
        if ws is not None and run["workspace"] != ws:
            raise UsageError(
                f"run {run['run_id'][:12]} was on workspace {run['workspace']}, not {ws}"
            )
    else:
        latest = latest_librarian_run(store, ws)
        if latest is None:
            where = f" on {ws}" if ws else ""
            raise UsageError(f"no finished librarian run{where} in {store.path}: run one first")
        run = latest
    root = Path(run["workspace"])
    if not root.is_dir():
        raise UsageError(f"workspace {root} of run {run['run_id'][:12]} is not a directory")
    settled = settled_notes(answers_given(store))
    states = []
    for q in questions_of_run(store, run["run_id"]):
        raw = current_bytes(root, q.note_path)
        digest = None if raw is None else sha256_hex(raw)
        state: QuestionState = (
            "missing"
            if digest is None
            else "answered"
            if (q.note_path, digest) in settled
            else "open"
            if digest == q.content_sha256
            else "changed"
        )
        states.append(AnsweredQuestion(q, state))
    topics, notes = _spec_of(store, run["spec_hash"])
    return ReviewRound(run, root, topics, states, notes)


# ------------------------------------------------------------------ answers


@dataclass(frozen=True, slots=True)
class Answer:
    kind: Literal["topic", "not_a_topic", "skip", "quit"]
    topic: str | None = None


def parse_answer(text: str, question: QuestionRow, topics: Sequence[str]) -> Answer:
    """A typed answer: a candidate's number, a topic name, ``s`` skip, ``d`` not a
    topic (defer for good), ``q`` quit. UsageError (one line) for anything else."""
    value = text.strip()
    lowered = value.lower()
    if lowered in ("s", "skip", ""):
        return Answer("skip")
    if lowered in ("q", "quit"):
        return Answer("quit")
    if lowered in ("d", "-", "defer", "not-a-topic", NOT_A_TOPIC):
        return Answer("not_a_topic")
    if value.isdigit():
        n = int(value)
        if not 1 <= n <= len(question.candidates):
            raise UsageError(f"no candidate {n}: choose 1-{len(question.candidates)}")
        return Answer("topic", str(question.candidates[n - 1]["topic"]))
    by_fold = {t.casefold(): t for t in topics}
    if value.casefold() in by_fold:
        return Answer("topic", by_fold[value.casefold()])
    raise UsageError(f"unknown topic {value!r}; topics: {', '.join(topics)}")


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    answer_id: str
    note_path: str
    answer: str
    topic: str | None
    run_id: str | None  # the run that wrote it; None when nothing needed writing

    def line(self) -> str:
        if self.answer == NOT_A_TOPIC:
            return f"{self.note_path}: left as it is (asked again only once the note changes)"
        if self.run_id is None:
            return f"{self.note_path}: keeps {self.topic} (no change)"
        return f"{self.note_path}: topic {self.topic} (run {self.run_id}; `toolwire undo` reverts)"


def apply_answer(
    store: Store,
    review: ReviewRound,
    question: QuestionRow,
    answer: Answer,
    *,
    user_id: str,
    source: str,
    workspace: Workspace | None = None,
) -> AnswerOutcome:
    """Keep the answer in the store, then apply it (a topic) through the journal as a run
    of its own. Refuses, in one line, a note changed since the question or an unknown
    topic; the answer is stored before any apply, so a refused apply loses nothing."""
    if answer.kind not in ("topic", NOT_A_TOPIC):
        raise UsageError(f"{answer.kind} is not an answer to apply")
    root = review.root
    if question.workspace and question.workspace != str(root):
        raise UsageError(f"the question is about workspace {question.workspace}, not {root}")
    if answer.kind == "topic" and answer.topic not in review.topics:
        raise UsageError(f"unknown topic {answer.topic!r}; topics: {', '.join(review.topics)}")
    raw = current_bytes(root, question.note_path)
    if raw is None or sha256_hex(raw) != question.content_sha256:
        what = "is gone" if raw is None else "changed"
        raise WorkspaceError(
            f"{question.note_path} {what} since run {question.run_id[:12]} asked about it; "
            "nothing was written: run the librarian again for a fresh question"
        )
    with Confined(root) as fs:
        blocked = write_blocker(fs, question.note_path) if answer.kind == "topic" else None
    if blocked:  # refused before the answer is kept: the question stays open
        raise WorkspaceError(
            f"{question.note_path}: {blocked}; nothing was written (make it writable first)"
        )
    answer_id = uuid.uuid4().hex
    changes = []
    op = _retag(question, str(answer.topic))
    if answer.kind == "topic":
        ws = workspace if workspace is not None else review.load_workspace()
        changes = render_changes(ws, [op], review.topics)
        wrong = [c.path for c in changes if c.path != question.note_path]
        if wrong:  # a note id or path that names another note now: write nothing
            raise WorkspaceError(
                f"the answer about {question.note_path} would write {', '.join(wrong)}; "
                "nothing was written: run the librarian again for a fresh question"
            )
    run_id = uuid.uuid4().hex if changes else None
    record_answer(
        store,
        AnswerRow(
            answer_id=answer_id,
            question_run_id=question.run_id,
            workspace=str(root),
            note_path=question.note_path,
            content_sha256=question.content_sha256,
            answer=answer.kind,
            topic=answer.topic,
            answer_sha256=changes[0].new_sha256 if changes else question.content_sha256,
            applied_run_id=run_id,
            user_id=user_id,
            source=source,
        ),
    )
    if run_id is not None:
        _apply_as_run(store, review, question, op, answer_id, run_id, changes, user_id)
    return AnswerOutcome(answer_id, question.note_path, answer.kind, answer.topic, run_id)


def remember_undo(
    store: Store, root: Path, run_id: str, restored: Sequence[str], *, user_id: str
) -> int:
    """``toolwire undo`` of a librarian run is the user's answer "not this": each note it
    gave back its old bytes gets a *leave it* answer for those bytes (source ``undo``), so
    later runs leave the note as it is and do not ask about it until it changes. Returns
    how many. (Undoing a review run instead opens its question again: not recorded.)"""
    count = 0
    for path in restored:
        raw = current_bytes(root, path)
        if raw is None:  # a note the run created, moved to the trash by the undo
            continue
        digest = sha256_hex(raw)
        record_answer(
            store,
            AnswerRow(
                answer_id=uuid.uuid4().hex,
                question_run_id=run_id,
                workspace=str(root),
                note_path=path,
                content_sha256=digest,
                answer=NOT_A_TOPIC,
                topic=None,
                answer_sha256=digest,
                applied_run_id=None,
                user_id=user_id,
                source="undo",
            ),
        )
        count += 1
    return count


def _retag(question: QuestionRow, topic: str) -> Operation:
    shown = next((c for c in question.candidates if c["topic"] == topic), None)
    confidence = float(shown["confidence"]) if shown else 1.0
    # By path, never by id: the id the question recorded may be another note's by now
    # (a copy of the note, sorting first, claims it) and the answer would write that one.
    return Operation(
        operation_id="op_1",
        kind="retag_note",
        target_note_id=None,
        target_path=question.note_path,
        title="",
        body_markdown=topic,
        reason=f"the user answered {topic} (question of run {question.run_id[:12]})",
        confidence=min(max(confidence, 0.0), 1.0),
    )


def _apply_as_run(
    store: Store,
    review: ReviewRound,
    question: QuestionRow,
    op: Operation,
    answer_id: str,
    run_id: str,
    changes: list[FileChange],
    user_id: str,
) -> None:
    """One answer as one run: the runs row first (a crash leaves it visible), the journal
    apply, then the run's operation, field changes and report in one transaction."""
    run = review.run
    store.start_run(
        {
            "run_id": run_id,
            "spec_hash": run["spec_hash"],
            "pack_hash": run["pack_hash"],
            "spec_name": run["spec_name"],
            "job": "review",
            "transport": run["transport"],
            "provider": "review",
            "model": "user",
            "workspace": str(review.root),
            "user_id": user_id,
            "status": "running",
            # pid and host as every run records them: a later run on the workspace then
            # settles this one if the process dies mid-apply (runstart.settle_dead_runs).
            "settings_json": {
                "question_run_id": question.run_id,
                "answer_id": answer_id,
                "pid": os.getpid(),
                "host": socket.gethostname(),
            },
        }
    )
    change = changes[0]
    outcome = OperationOutcome(
        turn=0,
        seq=0,
        operation=op,
        status="planned",
        path=change.path,
        before_sha256=change.old_sha256,
        after_sha256=change.new_sha256,
    )
    report = (
        f"# review answer {run_id}\n\n{question.note_path}: the user chose "
        f"{op.body_markdown} (asked by run {question.run_id}, {question.kind}; "
        f"answer {answer_id}).\n"
    )
    try:
        apply_plan(review.root, run_id, changes)
    except WorkspaceError as exc:
        store.finish_run(
            run_id,
            status="Failed",
            error_code=exc.code,
            error_message=exc.message,
            turns=0,
            operations=[replace(outcome, status="rejected", code=exc.code, detail=exc.message)],
            tool_calls=[],
            report_markdown=report,
        )
        raise
    store.finish_run(
        run_id,
        status="ok",
        error_code=None,
        error_message=None,
        turns=0,
        operations=[replace(outcome, status="applied")],
        tool_calls=[],
        report_markdown=report,
        note_changes=[
            (c.path, c.field, c.old, c.new) for c in field_changes(changes, review.topics)
        ],
    )
