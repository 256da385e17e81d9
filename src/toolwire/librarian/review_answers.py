"""`toolwire review`'s answers: read one typed answer, then apply it as a run of its own
(``job = 'review'``) through the journal, so ``runs``, ``show`` and ``undo`` see it; and
``toolwire undo``'s "not this", remembered as an answer (``librarian.review`` holds the
questions these answer).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from toolwire.domain import Operation, OperationOutcome
from toolwire.errors import UsageError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.write_blocker import write_blocker
from toolwire.librarian.journal.write_ahead import apply_plan
from toolwire.librarian.notes.changes import FileChange, render_changes
from toolwire.librarian.notes.workspace import Workspace, sha256_hex
from toolwire.librarian.review import NOT_A_TOPIC, ReviewRound, current_bytes
from toolwire.librarian.summary import field_changes
from toolwire.store import Store
from toolwire.store.review import AnswerRow, QuestionRow, record_answer

__all__ = ["Answer", "AnswerOutcome", "apply_answer", "parse_answer", "remember_undo"]


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
