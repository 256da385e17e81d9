"""``taken_back``: which applied changes the user took back, read from the
workspace's own journal (real apply and undo on a copy of the sample notes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.librarian.journal.reverted import taken_back
from toolwire.librarian.journal.write_ahead import apply_plan, undo_run
from toolwire.librarian.notes.changes import render_changes
from toolwire.librarian.notes.workspace import Workspace, sha256_hex

pytestmark = pytest.mark.local

NOTES = Path(__file__).resolve().parents[2] / "data" / "notes"
STARTER = "home/cooking/sourdough-starter.md"
TAX = "home/finance/tax-checklist.md"


def retag(target: str, topic: str) -> Operation:
    return Operation("op", "retag_note", target, None, "", topic, "r", 0.9)


def now(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): sha256_hex(p.read_bytes())
        for p in root.rglob("*.md")
        if ".toolwire" not in p.parts
    }


def apply(root: Path, run_id: str, *ops: Operation) -> None:
    apply_plan(root, run_id, render_changes(Workspace.load(root), list(ops)))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    shutil.copytree(NOTES, root)
    return root


def test_a_note_given_back_its_old_bytes_is_taken_back(notes: Path) -> None:
    before = (notes / STARTER).read_bytes()
    apply(notes, "run-a", retag(STARTER.removesuffix(".md"), "cooking"))
    apply(notes, "run-b", retag(TAX.removesuffix(".md"), "finance"))
    assert taken_back(notes, now(notes)) == {}
    (notes / STARTER).write_bytes(before)
    assert taken_back(notes, now(notes)) == {STARTER: "run-a"}


def test_only_the_latest_applied_change_counts(notes: Path) -> None:
    original = (notes / STARTER).read_bytes()
    apply(notes, "run-a", retag(STARTER.removesuffix(".md"), "cooking"))
    after_a = (notes / STARTER).read_bytes()
    apply(notes, "run-b", retag(STARTER.removesuffix(".md"), "travel"))
    (notes / STARTER).write_bytes(original)  # older than run-b's change: edited, not reverted
    assert taken_back(notes, now(notes)) == {}
    (notes / STARTER).write_bytes(after_a)
    assert taken_back(notes, now(notes)) == {STARTER: "run-b"}


def test_an_undone_run_takes_back_and_a_fresh_copy_takes_nothing_back(
    notes: Path, tmp_path: Path
) -> None:
    apply(notes, "run-a", retag(STARTER.removesuffix(".md"), "cooking"))
    undo_run(notes, "run-a")  # the journal, not the store, is the undo that sticks
    assert taken_back(notes, now(notes)) == {STARTER: "run-a"}
    fresh = tmp_path / "fresh"
    shutil.copytree(NOTES, fresh)  # the same bytes, no journal
    assert taken_back(fresh, now(fresh)) == {}


def test_an_unreadable_manifest_takes_nothing_back_and_spoils_no_other(notes: Path) -> None:
    before = (notes / STARTER).read_bytes()
    apply(notes, "run-a", retag(STARTER.removesuffix(".md"), "cooking"))
    apply(notes, "run-b", retag(TAX.removesuffix(".md"), "finance"))
    (notes / ".toolwire" / "journal" / "run-b" / "manifest.json").write_text("{not json")
    (notes / STARTER).write_bytes(before)
    assert taken_back(notes, now(notes)) == {STARTER: "run-a"}
