"""Safety round four: read-only notes and folders at apply time.

On the main of 2026-11-26 one read-only folder (``chmod 555``) failed the whole apply:
every other note's change was rolled back and the run said only "apply of run ...
failed: PermissionError: Permission denied", naming no file. A read-only note
(``chmod 444``) in a writable folder was replaced anyway, and ``toolwire undo`` stopped
half-way at a read-only folder (state ``undoing``, some notes restored). Now a planned change to a
note that is read-only, or whose folder is, is rejected with ``NOTE_READ_ONLY`` and a
warning naming the note; the other notes are applied. A write the OS still refuses
(the folder locked after the check) names the note in the one-line error, and undo
checks every note it would write before it writes any.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from replay_spec import replay_spec, retag_answer

from toolwire.errors import WorkspaceError
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.journal.disk import journal_state
from toolwire.librarian.journal.write_ahead import apply_plan, undo_run
from toolwire.librarian.notes.changes import FileChange

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
NOTES = {
    "a.md": "# A\nSQL indexes\n",
    "locked/b.md": "# B\nquery plans\n",
    "ro.md": "# RO\nanalytical engines\n",
    "sub/c.md": "# C\nduckdb\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    os.chmod(root / "ro.md", 0o444)
    os.chmod(root / "locked", 0o555)
    yield root
    os.chmod(root / "locked", 0o755)  # so tmp_path can be removed


def _spec(tmp: Path, answer: str) -> Path:
    return replay_spec(tmp, answer, name="surroundings-readonly")


def _retag_all() -> str:
    return retag_answer(rel[:-3] for rel in NOTES)


def test_read_only_notes_and_folders_are_left_and_the_rest_applied(
    vault: Path, tmp_path: Path
) -> None:
    ctx = prepare_run(_spec(tmp_path, _retag_all()), workspace=vault, db=tmp_path / "s.duckdb")
    result = run_librarian(ctx)

    assert result.status == "ok", result.error_message
    by_path = {o.path: o for o in result.outcomes}
    assert by_path["a.md"].status == by_path["sub/c.md"].status == "applied"
    for rel in ("ro.md", "locked/b.md"):
        assert (by_path[rel].status, by_path[rel].code) == ("rejected", "NOTE_READ_ONLY")
        assert (vault / rel).read_text(encoding="utf-8") == NOTES[rel]
    assert "left ro.md as it is: the note is read-only" in result.warnings
    assert "left locked/b.md as it is: locked/ is read-only" in result.warnings
    assert "tags: [databases]" in (vault / "a.md").read_text(encoding="utf-8")
    assert stat.S_IMODE((vault / "ro.md").stat().st_mode) == 0o444


_APPLY = """
import sys
from toolwire.errors import WorkspaceError
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.journal.write_ahead import apply_plan
root = sys.argv[1]
old = open(root + "/locked/b.md", "rb").read()
a = open(root + "/a.md", "rb").read()
try:
    apply_plan(root, "run-ro", [FileChange("a.md", a, a + b"x\\n"),
                                FileChange("locked/b.md", old, old + b"x\\n")])
except WorkspaceError as exc:
    print(exc.message)
"""


def _without_root_powers() -> list[str]:
    """The command prefix under which this process's permission bits are enforced."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: permission bits are not enforced")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def _run_without_root_powers(
    script: str, vault: Path, *, locked: Path | None = None, mode: int = 0o555
) -> subprocess.CompletedProcess[str]:
    """``script`` on ``vault`` in a child whose permission bits are enforced, with
    ``locked`` set to ``mode`` meanwhile (and back to 755 after)."""
    if locked is not None:
        os.chmod(locked, mode)
    try:
        return subprocess.run(
            [*_without_root_powers(), sys.executable, "-c", script, str(vault)],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )  # fmt: skip
    finally:
        if locked is not None:
            os.chmod(locked, 0o755)


def test_a_write_the_os_refuses_names_the_note(vault: Path) -> None:
    proc = _run_without_root_powers(_APPLY, vault)
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert message == (
        "apply of run run-ro failed: locked/b.md: not allowed to write there "
        "(Permission denied); the run was rolled back, no note changed"
    )
    assert (vault / "a.md").read_text(encoding="utf-8") == NOTES["a.md"]


def test_undo_with_a_read_only_folder_restores_nothing_and_says_why(vault: Path) -> None:
    a, c = (vault / "a.md").read_bytes(), (vault / "sub/c.md").read_bytes()
    apply_plan(
        vault, "run-u", [FileChange("a.md", a, a + b"x\n"), FileChange("sub/c.md", c, c + b"x\n")]
    )
    os.chmod(vault / "sub", 0o555)
    try:
        with pytest.raises(WorkspaceError) as caught:
            undo_run(vault, "run-u")
    finally:
        os.chmod(vault / "sub", 0o755)
    assert caught.value.message == (
        "refusing to undo run run-u: sub/c.md: sub/ is read-only. "
        "Nothing was restored; make them writable and undo again"
    )
    assert (vault / "a.md").read_bytes() == a + b"x\n"  # not half undone
    assert journal_state(vault, "run-u") == "applied"
    assert undo_run(vault, "run-u") == ["a.md", "sub/c.md"]
    assert (vault / "a.md").read_bytes() == a and (vault / "sub/c.md").read_bytes() == c


_LOAD = """
import sys
from toolwire.librarian.notes.workspace import Workspace
ws = Workspace.load(sys.argv[1])
print(sorted(ws.notes))
print(ws.warnings)
"""


def test_an_unreadable_folder_is_named_not_silently_skipped(vault: Path) -> None:
    """``chmod 000`` on a folder hid every note in it without a warning line."""
    proc = _run_without_root_powers(_LOAD, vault, locked=vault / "sub", mode=0o000)
    assert proc.returncode == 0, proc.stderr
    notes, warnings = proc.stdout.splitlines()
    assert notes == "['a', 'locked/b', 'ro']"
    assert warnings == "['skipped sub/: Permission denied']"


_APPLY_SUB = """
import sys
from toolwire.errors import WorkspaceError
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.journal.write_ahead import apply_plan
root = sys.argv[1]
old = open(root + "/sub/c.md", "rb").read()
try:
    apply_plan(root, "run-top", [FileChange("sub/c.md", old, old + b"x\\n")])
except WorkspaceError as exc:
    print(exc.code, exc.message)
"""


def test_a_read_only_workspace_folder_is_an_error_with_a_code(vault: Path) -> None:
    """No room for ``.toolwire/``: an INTERNAL_ERROR "PermissionError: [Errno 13]" before."""
    proc = _run_without_root_powers(_APPLY_SUB, vault, locked=vault)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        f"WORKSPACE_ERROR cannot create .toolwire/ in the workspace {vault.resolve()} "
        "(Permission denied): toolwire keeps its journal there; no note was changed"
    )
    assert (vault / "sub/c.md").read_text(encoding="utf-8") == NOTES["sub/c.md"]
    assert not (vault / ".toolwire").exists()


_BLOCKER = """
import sys
from toolwire.files.confined import Confined
from toolwire.files.write_blocker import write_blocker
with Confined(sys.argv[1]) as fs:
    print(write_blocker(fs, "theirs/d.md"))
"""


def test_a_folder_of_another_owner_blocks_a_write(vault: Path) -> None:
    """Mode 755 but owned by someone else: no write bit is missing, the owner is."""
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    (vault / "theirs").mkdir()
    (vault / "theirs/d.md").write_text("# D\n", encoding="utf-8")
    os.chown(vault / "theirs", 65534, 65534)  # nobody
    proc = _run_without_root_powers(_BLOCKER, vault)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "theirs/ is not writable here (its owner or a read-only file system)"
    )
