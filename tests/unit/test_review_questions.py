"""`toolwire review`'s pure parts: which notes are questions, and what a typed answer means."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.cli.review_cmds import _given_answers
from toolwire.errors import UsageError
from toolwire.librarian.judge.scorer import Candidate, NoteEvidence, NoteJudgement, decide
from toolwire.librarian.notes.workspace import Workspace, sha256_hex
from toolwire.librarian.review import (
    AnsweredQuestion,
    ReviewRound,
    current_bytes,
    is_misfiled,
    question_rows,
)
from toolwire.librarian.review_answers import Answer, parse_answer
from toolwire.store.review import QuestionRow

pytestmark = pytest.mark.unit

TOPICS = ["databases", "networking", "security", "travel"]


def _candidate(topic: str, confidence: float) -> Candidate:
    return Candidate(topic, confidence, confidence, 0.8, 0, False, 0)


def _judgement(note_id: str, current: str | None, *ranked: tuple[str, float]) -> NoteJudgement:
    """The judge's own decision (min_confidence 0.7), so judge.py and review agree."""
    cands = [_candidate(t, c) for t, c in ranked]
    note = NoteEvidence(note_id, f"{note_id}.md", "", "", current)
    return decide(note, cands, min_confidence=0.7)


def test_a_kept_topic_far_below_the_best_is_misfiled_a_close_one_is_not() -> None:
    far = _judgement("n", "databases", ("security", 0.69), ("databases", 0.09))
    close = _judgement("n", "databases", ("security", 0.40), ("databases", 0.35))
    best = _judgement("n", "databases", ("databases", 0.9), ("security", 0.05))
    low_best = _judgement("n", "databases", ("security", 0.12), ("databases", 0.05))
    untagged = _judgement("n", None, ("security", 0.5), ("databases", 0.01))
    assert far.decision == "keep" and is_misfiled(far)
    assert untagged.decision == "defer"
    assert not any(map(is_misfiled, (close, best, low_best, untagged)))


def test_questions_are_deferred_and_misfiled_notes_minus_answered_bytes(tmp_path: Path) -> None:
    notes = {
        "a.md": "Things to sort out.\n",
        "b.md": "---\ntags: [databases]\n---\nRenew TLS certificates.\n",
        "c.md": "---\ntags: [databases]\n---\nVACUUM and indexes.\n",
        "d.md": "Lunch order.\n",
    }
    for rel, text in notes.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    ws = Workspace.load(tmp_path)
    judgements = {
        "a": _judgement("a", None, ("travel", 0.4), ("security", 0.3)),
        "b": _judgement("b", "databases", ("security", 0.6), ("databases", 0.05)),
        "c": _judgement("c", "databases", ("databases", 0.9), ("security", 0.05)),
        "d": _judgement("d", None, ("travel", 0.3), ("security", 0.3)),
    }
    settled = {("d.md", sha256_hex(notes["d.md"].encode()))}  # "d" was answered "not a topic"
    rows = question_rows(tmp_path, ws, judgements, settled)
    assert [(r.note_path, r.kind, r.current_topic) for r in rows] == [
        ("a.md", "deferred", None),
        ("b.md", "misfiled", "databases"),
    ]
    assert rows[0].content_sha256 == sha256_hex(notes["a.md"].encode())
    assert rows[1].candidates[0] == {
        "topic": "security",
        "confidence": 0.6,
        "evidence": "security 0.60 (similarity 0.80)",
    }


QUESTION = QuestionRow(
    note_path="inbox/x.md",
    note_id="inbox/x",
    content_sha256="0" * 64,
    kind="deferred",
    current_topic=None,
    candidates=({"topic": "travel", "confidence": 0.4, "evidence": "travel 0.40"},
                {"topic": "security", "confidence": 0.3, "evidence": "security 0.30"}),
    why="why",
)  # fmt: skip


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("1", Answer("topic", "travel")),
        (" 2 ", Answer("topic", "security")),
        ("Networking", Answer("topic", "networking")),
        ("s", Answer("skip")),
        ("", Answer("skip")),
        ("d", Answer("not_a_topic")),
        ("Q", Answer("quit")),
    ],
)
def test_a_typed_answer_is_a_number_a_topic_or_a_letter(typed: str, expected: Answer) -> None:
    assert parse_answer(typed, QUESTION, TOPICS) == expected


@pytest.mark.parametrize(
    ("typed", "message"),
    [("3", "no candidate 3: choose 1-2"), ("cooking", "unknown topic 'cooking'; topics: data")],
)
def test_a_typed_answer_that_is_none_of_those_says_why(typed: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_answer(typed, QUESTION, TOPICS)


def test_answers_from_flags_and_a_file(tmp_path: Path) -> None:
    given = tmp_path / "answers.json"
    given.write_text('{"c.md": "security", "d.md": null}', encoding="utf-8")
    pairs = _given_answers(["a.md=travel", "dir/b=x.md=-"], given)
    assert pairs == [("a.md", "travel"), ("dir/b=x.md", None), ("c.md", "security"), ("d.md", None)]
    for bad in (["a.md"], ["=travel"], ["a.md="]):
        with pytest.raises(UsageError, match="expected PATH=TOPIC"):
            _given_answers(bad, None)
    given.write_text('["a.md"]', encoding="utf-8")
    with pytest.raises(UsageError, match="expected"):
        _given_answers([], given)


def test_a_stored_path_is_read_only_inside_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_bytes(b"kept")
    (tmp_path / "outside.md").write_bytes(b"secret")
    assert current_bytes(root, "a.md") == b"kept"
    assert current_bytes(root, "gone.md") is None  # deleted since the question
    assert current_bytes(root, "../outside.md") is None  # a tampered store row
    assert current_bytes(root, str(tmp_path / "outside.md")) is None


def test_a_note_is_named_from_the_workspace_from_here_or_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = (tmp_path / "vault").resolve()
    (root / "inbox").mkdir(parents=True)
    review = ReviewRound({"run_id": "r" * 32}, root, TOPICS, [AnsweredQuestion(QUESTION, "open")])
    monkeypatch.chdir(tmp_path)
    named = ("inbox/x.md", "./inbox/x.md", "inbox/x", "vault/inbox/x.md", str(root / "inbox/x.md"))
    for name in named:
        assert review.find(name).question is QUESTION, name
    for name in ("x.md", "vault/x.md", "/etc/passwd"):
        with pytest.raises(UsageError, match="no question about"):
            review.find(name)
