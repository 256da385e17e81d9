"""Issue 45 item 9: a spec's note globs cannot hang a run.

``notes.include: ["*a*a*...*b.md"]`` (14 stars) passed ``spec check``; then render
and run hung on every file name of a's (pathspec's regex backtracked ~n^14). The
globs are now matched by RE2 (pathspec's re2 backend): linear in the name, whatever
the glob. ``toolwire render`` on such a spec runs in a child with a time bound, so
the old code fails this test instead of hanging it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hostile.review_vault import TOOLWIRE, write_vault
from hostile.tally import Tally
from hostile.test_issue30_03_alias_bombs import write_spec

AREA = "issue 45 #9: note globs"
GLOBS = {
    "14 stars": "*a" * 13 + "*b.md",
    "stars and classes": "*[a-z]" * 12 + "*z.md",
    "stars and question marks": "*?a" * 10 + "*b.md",
    "double stars": "**/*a" * 8 + "*b.md",
}


@pytest.mark.parametrize("name", sorted(GLOBS))
def test_a_backtracking_glob_cannot_hang_render(name: str, tmp_path: Path, tally: Tally) -> None:
    """A name of 80 a's, matched by the glob (as a file and as a folder) on every walk."""
    vault = write_vault(tmp_path / "vault", {"a" * 80 + ".md": "Sourdough and bread.\n"})
    spec = write_spec(tmp_path)
    with spec.open("a", encoding="utf-8") as handle:
        handle.write(
            f"notes:\n  include: ['{GLOBS[name]}', '*.md']\n  exclude: ['{GLOBS[name]}/']\n"
        )
    tally.add(AREA, "inputs tried")
    checked = subprocess.run(
        [str(TOOLWIRE), "spec", "check", str(spec)], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stderr
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(TOOLWIRE), "render", str(spec), "--workspace", str(vault)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        tally.add(AREA, "hung", 1)
        pytest.fail(f"render with the glob {GLOBS[name]!r} ran over 120 s")
    tally.note(AREA, f"{name}: render in {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Sourdough and bread." in done.stdout
    tally.add(AREA, "hung", 0)
