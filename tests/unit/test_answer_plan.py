"""The planned answer (issue 15): the model fills only its slots; placeholders never stick."""

from __future__ import annotations

import pytest

from toolwire.domain import AnswerSlot, LibrarianResponse, Operation
from toolwire.librarian.answer import conform, grounded_title, plan_operations, render_template
from toolwire.librarian.judge.scorer import Candidate, NoteJudgement
from toolwire.protocols.attrless import parse_response

pytestmark = pytest.mark.unit


def _judgement(note_id: str, decision: str, current: str | None = None) -> NoteJudgement:
    cands = (
        Candidate("cooking", 0.9, 0.9, 0.88, 2, True, 1),
        Candidate("travel", 0.1, 0.8, 0.80, 0, False, 0),
    )
    return NoteJudgement(note_id, current, cands, decision, "evidence")  # type: ignore[arg-type]


def test_placeholder_titles_are_not_grounded() -> None:
    body = "wg-quick up wg0 brings the WireGuard tunnel up"
    assert not grounded_title("NOTE_TITLE", body)
    assert not grounded_title("Title of the note", body)
    assert grounded_title("WireGuard tunnel", body)


def test_forced_answer_parses_and_conform_keeps_only_slot_values() -> None:
    plan = plan_operations(
        [("a", ""), ("b", "Bread")],
        {"a": _judgement("a", "retag"), "b": _judgement("b", "keep", "cooking")},
        allowed_kinds=["retag_note", "retitle_note", "defer"],
        decide="scorer",
        candidates=3,
        write_titles=True,
    )
    assert [(p.kind, p.target_note_id) for p in plan] == [
        ("retitle_note", "a"),
        ("retag_note", "a"),
    ]
    template = render_template("req_1", plan)
    slots = [p for p in template if isinstance(p, AnswerSlot)]
    assert [s.name for s in slots] == ["title"]
    # What a model writing the slot would produce: the literals around a title.
    text = "".join(p if isinstance(p, str) else "Dal on weeknights</title>" for p in template)
    parsed = parse_response(text)
    texts = {"a": "a weeknight dal with red lentils on weeknights"}
    out = conform(parsed, plan, texts)
    assert [(o.kind, o.title, o.body_markdown) for o in out.operations] == [
        ("retitle_note", "Dal on weeknights", "-"),
        ("retag_note", "", "cooking"),
    ]
    assert out.operations[1].confidence == 0.9  # the scorer's, not a model's
    # A model that writes a placeholder and invents a confidence changes nothing it may not.
    bad = LibrarianResponse(
        "req_1", "ok", "x",
        (
            Operation("op_1", "retitle_note", "a", None, "NOTE_TITLE", "-", "SHORT_REASON", 0.0),
            Operation("op_2", "retag_note", "a", None, "", "travel", "SHORT_REASON", 0.0),
        ),
        (),
    )  # fmt: skip
    out = conform(bad, plan, texts)
    assert [(o.kind, o.body_markdown, o.confidence) for o in out.operations] == [
        ("retag_note", "cooking", 0.9)
    ]
