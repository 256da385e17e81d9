"""The store's side of `toolwire review`: questions a librarian run asked, answers given.

Both tables are append-only (migration 8, ``review_questions``): a question is never
edited, and an answer is written *before* anything is applied, so a crash or a refused
apply never loses what the user said. Whether an answer took effect is read from its
run (``applied_run_id``: the runs row, the journal), not stored twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from toolwire.store.store import Store
from toolwire.store.values import storable_text, utcnow

__all__ = [
    "AnswerRow",
    "QuestionRow",
    "answers_given",
    "latest_librarian_run",
    "questions_of_run",
    "record_answer",
    "record_questions",
]

_QUESTION_COLUMNS = (
    "run_id, seq, workspace, note_path, note_id, content_sha256, kind, current_topic, "
    "candidates_json, why, created_at"
)
_ANSWER_COLUMNS = (
    "answer_id, question_run_id, workspace, note_path, content_sha256, answer, topic, "
    "answer_sha256, applied_run_id, user_id, source, answered_at"
)


@dataclass(frozen=True, slots=True)
class QuestionRow:
    """One question: a note, its bytes when asked, and the evidence the user is shown."""

    note_path: str
    note_id: str
    content_sha256: str
    kind: str  # 'deferred' | 'misfiled'
    current_topic: str | None
    candidates: tuple[dict[str, Any], ...]  # {topic, confidence, evidence}, best first
    why: str
    run_id: str = ""
    seq: int = 0
    workspace: str = ""
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AnswerRow:
    answer_id: str
    question_run_id: str
    workspace: str
    note_path: str
    content_sha256: str
    answer: str  # 'topic' | 'not_a_topic'
    topic: str | None
    answer_sha256: str
    applied_run_id: str | None
    user_id: str
    source: str  # 'prompt' | 'cli' | 'file'
    answered_at: datetime | None = None


def record_questions(
    store: Store, run_id: str, workspace: str, questions: Sequence[QuestionRow]
) -> int:
    """Append a run's questions, numbered after any it already has; returns how many."""
    now = utcnow()
    _, last = store.query(
        "SELECT coalesce(max(seq), -1) + 1 FROM review_questions WHERE run_id = ?", [run_id]
    )
    first = int(last[0][0]) if last else 0
    numbered = list(enumerate(questions, start=first))
    strings = {
        "workspace": [workspace] * len(numbered),
        "note_path": [q.note_path for _, q in numbered],
        "note_id": [q.note_id for _, q in numbered],
        "content_sha256": [q.content_sha256 for _, q in numbered],
        "kind": [q.kind for _, q in numbered],
        "current_topic": [q.current_topic for _, q in numbered],
        "candidates_json": [
            storable_text(json.dumps(list(q.candidates), ensure_ascii=False)) for _, q in numbered
        ],
        "why": [storable_text(q.why) for _, q in numbered],
    }
    rows = pa.table(
        {
            "run_id": pa.array([run_id] * len(numbered), pa.string()),
            "seq": pa.array([seq for seq, _ in numbered], pa.int32()),
            **{name: pa.array(values, pa.string()) for name, values in strings.items()},
            "created_at": pa.array([now] * len(numbered), pa.timestamp("us")),
        }
    )
    store.write_rows("review_questions", rows, what="record review questions")
    return rows.num_rows


def questions_of_run(store: Store, run_id: str) -> list[QuestionRow]:
    """Every question ``run_id`` asked, in the order it asked them."""
    _, rows = store.query(
        f"SELECT {_QUESTION_COLUMNS} FROM review_questions WHERE run_id = ? ORDER BY seq",
        [run_id],
    )
    return [
        QuestionRow(
            run_id=r[0],
            seq=int(r[1]),
            workspace=r[2],
            note_path=r[3],
            note_id=r[4] or "",
            content_sha256=r[5],
            kind=r[6],
            current_topic=r[7],
            candidates=tuple(json.loads(r[8])),
            why=r[9] or "",
            created_at=r[10],
        )
        for r in rows
    ]


def record_answer(store: Store, answer: AnswerRow) -> None:
    """Keep one answer (before it is applied: an apply that fails never loses it)."""
    values = [
        answer.answer_id,
        answer.question_run_id,
        answer.workspace,
        answer.note_path,
        answer.content_sha256,
        answer.answer,
        answer.topic,
        answer.answer_sha256,
        answer.applied_run_id,
        answer.user_id,
        answer.source,
        answer.answered_at or utcnow(),
    ]
    store.write(
        f"INSERT INTO review_answers ({_ANSWER_COLUMNS}) VALUES ({', '.join('?' * len(values))})",
        values,
    )


def answers_given(store: Store) -> list[AnswerRow]:
    """Every answer in the store, oldest first. An answer holds for a note (its path in
    the vault) and its bytes, wherever the vault is mounted (issue 45 item 4: keyed by the
    absolute path, ``mv notes notes-2024`` forgot every answer); callers match on both."""
    _, rows = store.query(
        f"SELECT {_ANSWER_COLUMNS} FROM review_answers ORDER BY answered_at, answer_id"
    )
    return [
        AnswerRow(
            answer_id=r[0],
            question_run_id=r[1],
            workspace=r[2],
            note_path=r[3],
            content_sha256=r[4],
            answer=r[5],
            topic=r[6],
            answer_sha256=r[7],
            applied_run_id=r[8],
            user_id=r[9] or "",
            source=r[10] or "",
            answered_at=r[11],
        )
        for r in rows
    ]


def latest_librarian_run(store: Store, workspace: str | None) -> dict[str, Any] | None:
    """The newest librarian run that ended ok (on ``workspace`` when given): the run
    whose questions are open. None when there is none."""
    sql = (
        "SELECT run_id, workspace, spec_hash, pack_hash, spec_name, transport, user_id, "
        "dry_run, started_at FROM runs WHERE job = 'librarian' AND status = 'ok'"
    )
    params: list[Any] = []
    if workspace is not None:
        sql += " AND workspace = ?"
        params.append(workspace)
    columns, rows = store.query(sql + " ORDER BY started_at DESC, run_id LIMIT 1", params)
    return dict(zip(columns, rows[0], strict=True)) if rows else None
