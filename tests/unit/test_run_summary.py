"""What a run changed, note by note: old -> new from the bytes, and the deferred notes."""

from __future__ import annotations

import pytest

from toolwire.domain import Operation, OperationOutcome
from toolwire.librarian.judge.scorer import Candidate, NoteJudgement
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.summary import deferred_notes, field_changes

pytestmark = pytest.mark.unit

BEFORE = b"---\ntitle: Index funds\n# why I hold them\ntags: [cooking, investing]\n---\nBody.\n"
AFTER = b"---\ntitle: Index funds\n# why I hold them\ntags: [finance, investing]\n---\nBody.\n"


def test_a_retag_shows_the_topic_and_the_tags_old_to_new() -> None:
    rows = field_changes(
        [FileChange("home/finance/index-funds.md", BEFORE, AFTER)], ["cooking", "finance"]
    )
    assert [(r.field, r.old, r.new) for r in rows] == [
        ("topic", "cooking", "finance"),
        ("tags", "cooking, investing", "finance, investing"),
    ]
    assert {r.path for r in rows} == {"home/finance/index-funds.md"}


def test_a_retitle_a_create_and_a_body_edit_each_say_what_they_are() -> None:
    rows = field_changes(
        [
            FileChange("a.md", b"Some text.\n", b"---\ntitle: Rail passes\n---\nSome text.\n"),
            FileChange("new.md", None, b"# A new note\n\nText.\n"),
            FileChange("b.md", b"# B\n\nold\n", b"# B\n\nnew\n"),
            FileChange("c.md", b"# C\n", b"# C\n"),  # unchanged: no row
        ],
        ["cooking"],
    )
    assert [(r.path, r.field, r.old, r.new) for r in rows] == [
        ("a.md", "title", "", "Rail passes"),
        ("new.md", "note", "", "A new note"),
        ("b.md", "body", "3 lines", "3 lines"),
    ]


def test_a_deferred_note_lists_its_best_candidates_and_why(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "draft.md").write_text("# Draft\n\nalerts and budgets\n")
    ws = Workspace.load(tmp_path)
    (note,) = ws.notes.values()
    candidates = tuple(
        Candidate(t, c, 0.0, 0.0, 0, False, 0)
        for t, c in (("observability", 0.61), ("finance", 0.3))
    )
    why = "best observability is below min_confidence 0.7"
    judgement = NoteJudgement(note.note_id, None, candidates, "defer", why)
    op = Operation("op1", "defer", note.note_id, None, "", "", "low", 0.61)
    kept = Operation("op2", "retag_note", note.note_id, None, "", "finance", "", 0.9)
    rows = deferred_notes(
        ws,
        [OperationOutcome(0, 0, op, "deferred"), OperationOutcome(0, 1, kept, "planned")],
        {note.note_id: judgement},
    )
    assert [(r.path, r.candidates, r.why) for r in rows] == [
        ("inbox/draft.md", "observability 0.61, finance 0.30", why)
    ]
