"""Issue 33 item 6: `toolwire runs` in a real terminal, and `report --html` paths.

`toolwire runs` runs in a pseudo-terminal of 80 (and 100) columns: every run's
12-character id shows whole, no line passes the width, the columns left out
are named, and a dry run shows what it planned. `report --html` into a folder
that does not exist refuses in one line and creates nothing.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from test_librarian_replay import VALID, _spec, _workspace

from toolwire.store import Store

pytestmark = pytest.mark.local

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def toolwire(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        cwd=cwd,
        env=os.environ | {"PREFECT_API_URL": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )


def in_terminal(args: list[str], columns: int, cwd: Path) -> str:
    """Run ``toolwire ARGS`` with a pty of ``columns`` x 40 as its terminal; its output."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolwire", *args],
        stdin=child, stdout=child, stderr=child, cwd=cwd, close_fds=True,
        env=env | {"TERM": "xterm-256color", "PREFECT_API_URL": ""},
    )  # fmt: skip
    os.close(child)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(main)
    assert proc.returncode == 0, out.decode(errors="replace")
    return ANSI.sub("", out.decode("utf-8", errors="replace")).replace("\r", "")


@pytest.fixture(scope="module")
def store_with_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store with a long-named applied run and a dry run (2 operations planned)."""
    tmp = tmp_path_factory.mktemp("runs")
    ws = _workspace(tmp)
    spec = _spec(tmp, [VALID])
    spec.write_text(spec.read_text().replace("librarian-test", "a-rather-long-spec-name-here"))
    db = tmp / "store.duckdb"
    for flags in (["--dry-run"], []):
        ran = toolwire("run", spec, "--workspace", ws, "--db", db, "--no-prefect", *flags, cwd=tmp)
        assert ran.returncode == 0, ran.stderr
    _, rows = Store(db).query("SELECT run_id FROM runs ORDER BY started_at")
    return db, [r[0] for r in rows]


@pytest.mark.parametrize("columns", [80, 100])
def test_runs_keeps_the_run_id_at_any_width(
    store_with_runs: tuple[Path, list[str]], columns: int
) -> None:
    db, run_ids = store_with_runs
    out = in_terminal(["runs", "--db", str(db)], columns, db.parent)
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    lines = [line.strip() for line in lines]
    for run_id in run_ids:
        assert any(line.startswith(run_id[:12]) for line in lines), out
    assert "not shown at this width:" in out  # the columns left out are named
    header = next(line for line in lines if line.startswith("run "))
    assert "planned" in header, out
    dry = next(line for line in lines if line.startswith(run_ids[0][:12]))
    assert re.search(r"\b0/0/0\s+2\b", dry), dry  # nothing applied, 2 planned


def test_runs_piped_shows_every_column(store_with_runs: tuple[Path, list[str]]) -> None:
    db, run_ids = store_with_runs
    ran = toolwire("runs", "--db", db, cwd=db.parent)
    assert ran.returncode == 0, ran.stderr
    assert "tok in/out" in ran.stdout and "not shown" not in ran.stdout
    assert all(run_id[:12] in ran.stdout for run_id in run_ids)


def test_report_html_refuses_a_missing_folder(
    store_with_runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, _ = store_with_runs
    target = tmp_path / "nonexistent" / "dir" / "x.html"
    ran = toolwire("report", "--html", target, "--db", db, cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith("error: ") and "no folder" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert not (tmp_path / "nonexistent").exists()
    made = toolwire("report", "--html", tmp_path / "x.html", "--db", db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "x.html").is_file()
