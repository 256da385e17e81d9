"""Safety round four: a note saved by another process while toolwire judges or writes it.

``apply_plan`` checks every note before the journal and again right before its write,
but writing the replacement (temp file, fsync) takes milliseconds, and on the main of
2026-11-26 a save that landed in them was replaced by the rename: the run ended
``applied`` and the user's edit was gone. Now the note is checked once more right
before the rename: the edit is kept, the run is rolled back and says which note.
The same holds for ``toolwire undo`` and ``undo --force``. The second process is real
(a ``python -c`` that appends to the note) and is started at the moment toolwire has
created its temp file for that note.

And a note edited or removed while the run judged (between reading the notes and
applying) failed the whole run ("note changed since the plan ... nothing was written");
now that note is left as it is (``NOTE_CHANGED``, a warning) and the others apply.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_spec import replay_spec, retag_answer

from toolwire.errors import WorkspaceError
from toolwire.files.confined import TEMP_PREFIX, Confined
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.journal.disk import journal_state
from toolwire.librarian.journal.write_ahead import apply_plan, undo_run
from toolwire.librarian.notes.changes import FileChange

pytestmark = pytest.mark.local

NOTES = {
    "a.md": b"# A\nfirst note\n",
    "sub/b.md": b"# B\nsecond note\n",
    "c.md": b"# C\nthird note\n",
}
EDIT = b"a line the user saved\n"


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for rel, data in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _plan() -> list[FileChange]:
    return [FileChange(rel, old, b"---\ntopic: x\n---\n" + old) for rel, old in NOTES.items()]


def _save_from_another_process(note: Path) -> None:
    code = f"open({str(note)!r}, 'ab').write({EDIT!r})"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _edit_when_writing(monkeypatch: pytest.MonkeyPatch, note: Path, nth: int) -> Callable[[], int]:
    """Make another process save ``note`` when toolwire's ``nth`` temp file exists."""
    real = Confined._create_temp
    made: list[int] = []

    def create_then_edit(dir_fd: int, tmp: str, *, fixed: bool) -> int:
        fd = real(dir_fd, tmp, fixed=fixed)
        made.append(fd)
        if len(made) == nth:
            _save_from_another_process(note)
        return fd

    monkeypatch.setattr(Confined, "_create_temp", staticmethod(create_then_edit))
    return lambda: len(made)


def _no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob(f"{TEMP_PREFIX}*") if ".toolwire" not in p.parts]


def test_a_save_during_the_write_is_kept_and_the_run_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(tmp_path)
    # journal temp files: state.json once ("applying"); then a.md, sub/b.md...
    _edit_when_writing(monkeypatch, root / "sub/b.md", nth=3)
    with pytest.raises(WorkspaceError, match=r"sub/b\.md.*rolled back"):
        apply_plan(root, "run-1", _plan())
    assert (root / "sub/b.md").read_bytes() == NOTES["sub/b.md"] + EDIT  # the save is kept
    assert (root / "a.md").read_bytes() == NOTES["a.md"]  # written, then put back
    assert (root / "c.md").read_bytes() == NOTES["c.md"]  # never written
    assert journal_state(root, "run-1") == "aborted"
    assert _no_temp_files(root)


def test_a_save_during_undo_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _vault(tmp_path)
    plan = _plan()
    apply_plan(root, "run-2", plan)
    # undo's temp files: state.json ("undoing"), then a.md, sub/b.md...
    _edit_when_writing(monkeypatch, root / "sub/b.md", nth=3)
    with pytest.raises(WorkspaceError, match=r"sub/b\.md"):
        undo_run(root, "run-2")
    assert (root / "sub/b.md").read_bytes() == plan[1].new + EDIT
    assert (root / "a.md").read_bytes() == NOTES["a.md"]
    assert _no_temp_files(root)


def test_a_save_during_a_forced_undo_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(tmp_path)
    plan = _plan()
    apply_plan(root, "run-3", plan)
    (root / "a.md").write_bytes(b"edited by hand\n")  # why --force is needed
    # forced undo's temp files: state.json ("undoing"), the trash copy of a.md, a.md
    _edit_when_writing(monkeypatch, root / "a.md", nth=3)
    with pytest.raises(WorkspaceError, match=r"a\.md was edited while"):
        undo_run(root, "run-3", force=True)
    assert (root / "a.md").read_bytes() == b"edited by hand\n" + EDIT
    trash = root / ".toolwire/trash/run-3/a.md"
    assert trash.read_bytes() == b"edited by hand\n"
    assert _no_temp_files(root)


REPO = Path(__file__).resolve().parents[2]


def _replay_spec(tmp: Path, notes: list[str]) -> Path:
    return replay_spec(tmp, retag_answer(rel[:-3] for rel in notes), name="surroundings-apply")


def test_notes_edited_or_removed_while_the_run_judged_are_left_and_the_rest_applied(
    tmp_path: Path,
) -> None:
    """The second process edits sub/b.md and removes c.md when the run reaches apply."""
    root = _vault(tmp_path)
    script = (
        f"import os; open({str(root / 'sub/b.md')!r}, 'ab').write({EDIT!r}); "
        f"os.remove({str(root / 'c.md')!r})"
    )

    def step(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        if name == "apply":
            subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        return fn(*args)

    spec = _replay_spec(tmp_path, list(NOTES))
    ctx = prepare_run(spec, workspace=root, db=tmp_path / "store.duckdb")
    result = run_librarian(ctx, step=step)

    assert result.status == "ok", result.error_message
    got = {o.path: (o.status, o.code) for o in result.outcomes}
    assert got == {
        "a.md": ("applied", None),
        "sub/b.md": ("rejected", "NOTE_CHANGED"),
        "c.md": ("rejected", "NOTE_CHANGED"),
    }
    assert b"tags: [databases]" in (root / "a.md").read_bytes()
    assert (root / "sub/b.md").read_bytes() == NOTES["sub/b.md"] + EDIT
    assert not (root / "c.md").exists()  # not brought back
    assert "left c.md as it is: removed since it was read" in result.warnings
    assert any(w.startswith("left sub/b.md as it is: edited since") for w in result.warnings)


def test_undo_says_a_missing_workspace_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    with pytest.raises(WorkspaceError, match=r"workspace \S+/gone does not exist$"):
        undo_run(tmp_path / "gone", "run-x")
    with pytest.raises(WorkspaceError, match=r"workspace \S+/a-file is not a directory$"):
        undo_run(tmp_path / "a-file", "run-x")


def test_undo_after_the_user_removed_an_applied_note_says_removed(tmp_path: Path) -> None:
    root = _vault(tmp_path)
    apply_plan(root, "run-rm", _plan())
    (root / "c.md").unlink()
    with pytest.raises(WorkspaceError, match=r"edited since the run: c\.md \(removed\)\. Noth"):
        undo_run(root, "run-rm")
    assert undo_run(root, "run-rm", force=True) == list(NOTES)
    assert {rel: (root / rel).read_bytes() for rel in NOTES} == NOTES
