"""`toolwire review`: the librarian asks the user about the notes it could not decide.

A librarian run's *questions* are its deferred notes (no topic confident enough) and
the notes whose current topic the scorer rates far below another (*misfiled*). At the
end of a run they are stored with the evidence shown (``record_run_questions``); the
review command walks the open ones of the latest run and applies each answer
(``review_answers``):

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toolwire.errors import StoreError, UsageError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path
from toolwire.librarian.judge.scorer import NoteJudgement
from toolwire.librarian.notes.workspace import Workspace, sha256_hex
from toolwire.spec.model import NotesSpec
from toolwire.store import Store
from toolwire.store.review import (
    AnswerRow,
    QuestionRow,
    answers_given,
    latest_librarian_run,
    questions_of_run,
    record_questions,
)

__all__ = [
    "AnsweredQuestion",
    "ReviewRound",
    "current_bytes",
    "is_misfiled",
    "left_as_is",
    "load_round",
    "question_rows",
    "record_run_questions",
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

    # In the order that teaches most (``NoteJudgement.ask_rank``, issue 41), not by path.
    def asked_first(note: Any) -> tuple[int, str]:
        j = judgements.get(note.note_id)
        return (j.ask_rank if j is not None else 0, note.path)

    for note in sorted(workspace.notes.values(), key=asked_first):
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
                why=_expected(j) + j.why,
            )
        )
    return rows


def _expected(j: NoteJudgement) -> str:
    """What an answer is expected to decide, for the person answering."""
    if j.decision != "defer":
        return ""
    if j.decides <= 1:
        return "an answer decides this note; "
    return f"an answer is expected to decide ~{j.decides} notes (this one and similar ones); "


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
