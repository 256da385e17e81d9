"""Safety round four: the agent's ``write_file`` tool and read-only notes and folders.

On the main of 2026-11-26 ``write_file`` replaced a note the user had made read-only
(``chmod 444``), and one in a read-only folder, whenever toolwire ran as root (the
librarian leaves such notes as they are: ``NOTE_READ_ONLY``). Now the tool refuses
them in one line the model reads, and writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolwire.tools.builtins import ToolFailed, write_file

pytestmark = pytest.mark.local


def test_write_file_leaves_read_only_notes_and_folders(tmp_path: Path) -> None:
    root = (tmp_path / "ws").resolve()
    (root / "locked").mkdir(parents=True)
    for rel in ("ro.md", "locked/a.md", "free.md"):
        (root / rel).write_text("old\n", encoding="utf-8")
    os.symlink("ro.md", root / "ro-link.md")  # written at its target, so refused too
    os.chmod(root / "ro.md", 0o444)
    os.chmod(root / "locked", 0o555)
    try:
        for rel, why in (
            ("ro.md", "the note is read-only"),
            ("ro-link.md", "the note is read-only"),
            ("locked/a.md", "locked/ is read-only"),
            ("locked/new.md", "locked/ is read-only"),
        ):
            with pytest.raises(ToolFailed) as caught:
                write_file(root, rel, "new\n")
            assert caught.value.message == f"cannot write {rel!r}: {why}"
        assert write_file(root, "free.md", "new\n") == {"path": "free.md", "bytes": 4}
    finally:
        os.chmod(root / "locked", 0o755)
    assert (root / "ro.md").read_text(encoding="utf-8") == "old\n"
    assert (root / "locked/a.md").read_text(encoding="utf-8") == "old\n"
    assert not (root / "locked/new.md").exists()
    assert (root / "free.md").read_text(encoding="utf-8") == "new\n"
