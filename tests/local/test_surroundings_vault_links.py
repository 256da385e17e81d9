"""Safety round four: symlinks among the notes are never judged twice nor turned into files.

On the main of 2026-11-26 a note that was a symlink to another note of the vault was
read as a second note with the same text; retagging both replaced the link with a
plain file (two copies that no longer follow each other), and ``toolwire undo`` put the
old bytes back into that file: the link itself was lost. Now a link is never a note of
its own: a link to a note is that note, read once at its own path, and the link stays a
link through apply and undo; any other link is skipped. Each skip is a warning line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.librarian.journal.write_ahead import apply_plan, undo_run
from toolwire.librarian.notes.changes import render_changes
from toolwire.librarian.notes.workspace import Workspace

pytestmark = pytest.mark.local


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "sub").mkdir(parents=True)
    (root / "Templates").mkdir()
    (root / "real.md").write_text("# Real\nSQL indexes\n", encoding="utf-8")
    (root / "Templates/t.md").write_text("# Template\n", encoding="utf-8")
    os.symlink("real.md", root / "alias.md")
    os.symlink("../real.md", root / "sub/alias2.md")
    os.symlink("alias.md", root / "chain.md")  # a link to a link to the note
    os.symlink("Templates/t.md", root / "template-link.md")  # excluded by the defaults
    os.symlink("notes.txt", root / "text-link.md")
    (root / "notes.txt").write_text("not markdown\n", encoding="utf-8")
    return root


def _links(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): os.readlink(p) for p in root.rglob("*.md") if p.is_symlink()
    }


def test_a_link_is_never_a_note_of_its_own_and_each_skip_is_said(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    ws = Workspace.load(root)
    assert sorted(ws.notes) == ["real"]
    said = "\n".join(ws.warnings)
    for rel in ("alias.md", "sub/alias2.md", "chain.md"):
        assert f"skipped {rel}: a symlink to the note real.md, read there" in said
    assert "skipped template-link.md: a symlink to Templates/t.md, which is not a note" in said
    assert "skipped text-link.md: a symlink to notes.txt, which is not a note" in said


def test_links_stay_links_through_apply_and_undo(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    links = _links(root)
    ws = Workspace.load(root)
    ops = [
        Operation("op", "retag_note", note.note_id, None, "", "databases", "r", 0.9)
        for note in ws.notes.values()
    ]
    changes = render_changes(ws, ops, ["databases"])
    assert [c.path for c in changes] == ["real.md"]

    apply_plan(root, "run-links", changes)
    assert _links(root) == links
    assert (root / "alias.md").read_bytes() == (root / "real.md").read_bytes()
    assert b"tags: [databases]" in (root / "real.md").read_bytes()

    assert undo_run(root, "run-links") == ["real.md"]
    assert _links(root) == links
    assert (root / "sub/alias2.md").read_text(encoding="utf-8") == "# Real\nSQL indexes\n"
