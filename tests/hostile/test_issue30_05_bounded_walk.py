"""Issue #30 item 5: one bounded walker; no folder depth crashes a run, no run stays `running`.

On the main of 2026-11-25 a folder 1,100 levels deep inside a workspace made
every run die with a ``RecursionError`` traceback (``os.fwalk`` recursing in
``Confined.walk``), and the run was left ``running``. Now the walker keeps its
own stack and bounded depth and size: the run finishes ``ok`` with a warning
naming the folder it did not enter, and the model's file tool lists the same
tree without error. And whatever exception escapes a run, the run ends
``Failed`` (``INTERNAL_ERROR``) with one line, never ``running``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally
from hostile.test_faults import (
    VALID,
    child_env,
    digest,
    run_args,
    run_ids,
    run_row,
    write_spec,
    write_workspace,
)
from toolwire.files.confined import Confined
from toolwire.files.walk import MAX_WALK_DEPTH
from toolwire.tools.builtins import list_dir

AREA = "issue 30 #5: bounded walker"
LEVELS = 1_100


def deep_chain(root: Path, levels: int = LEVELS) -> None:
    """``root/d/d/.../d/deep.md`` (levels folders): built by descriptor, no path is too long."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(levels):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
        if level in (5, levels - 1):
            note = os.open("n.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(note, f"# level {level}\n\nA note {level + 1} folders down.\n".encode())
            os.close(note)
    os.close(fd)


def remove_chain(root: Path) -> None:
    """pytest's tmp_path cleanup recurses too: take the chain apart bottom-up."""
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    for parent, fd in zip(reversed(fds[:-1]), reversed(fds[1:]), strict=True):
        for name in os.listdir(fd):
            os.unlink(name, dir_fd=fd)
        os.close(fd)
        os.rmdir("d", dir_fd=parent)
    os.close(fds[0])


@pytest.mark.timeout(300)
def test_item_5_a_deep_folder_is_skipped_with_a_warning_and_the_run_ends_ok(
    tmp_path: Path, tally: Tally
) -> None:
    ws = write_workspace(tmp_path / "notes")
    deep_chain(ws)
    try:
        warnings: list[str] = []
        with Confined(ws) as fs:
            folders = sum(1 for _ in fs.walk(warnings=warnings))
        assert MAX_WALK_DEPTH < folders < MAX_WALK_DEPTH + 10  # the chain, cut at the bound
        assert len(warnings) == 1 and "deeper than" in warnings[0]
        listed = list_dir(ws, ".", recursive=True)  # the model's tool: same walker
        assert "d/d/d/d/d/d/n.md" in listed
        tally.add(AREA, "inputs tried")

        db = tmp_path / "s.duckdb"
        done = subprocess.run(
            [sys.executable, "-m", "toolwire", *map(str, run_args(write_spec(tmp_path, [VALID]),
             ws, db))], capture_output=True, text=True, env=child_env(), timeout=240,
        )  # fmt: skip
        tally.add(AREA, "runs")
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
        assert done.returncode == 0, done.stderr[-2000:]
        (run_id,) = run_ids(db)
        assert run_row(db, run_id) == ("ok", None)
        assert "deeper than" in done.stdout + done.stderr or _warned(db, run_id)
        tally.add(AREA, "hung or left running", 0)
    finally:
        remove_chain(ws)


def _warned(db: Path, run_id: str) -> bool:
    from toolwire.store import Store

    return any("deeper than" in w for w in Store(db, create=False).run_warnings(run_id))


CRASHING_CHILD = """
import sys
from toolwire.librarian.notes import workspace

def boom(*args, **kwargs):
    raise RecursionError("maximum recursion depth exceeded while calling a Python object")

workspace.Workspace.load = boom
from toolwire.cli import main
sys.argv = ["toolwire", *sys.argv[1:]]
main()
"""


@pytest.mark.timeout(300)
def test_item_5_any_exception_ends_the_run_failed_not_running(tmp_path: Path, tally: Tally) -> None:
    ws = write_workspace(tmp_path / "notes")
    before = digest(ws)
    db = tmp_path / "s.duckdb"
    args = [str(a) for a in run_args(write_spec(tmp_path, [VALID]), ws, db)]
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, *args],
        capture_output=True, text=True, env=child_env(), timeout=240,
    )  # fmt: skip
    tally.add(AREA, "faults injected")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "INTERNAL_ERROR" in done.stderr and "RecursionError" in done.stderr
    (run_id,) = run_ids(db)
    assert run_row(db, run_id) == ("Failed", "INTERNAL_ERROR")
    assert digest(ws) == before
    tally.add(AREA, "hung or left running", 0)
