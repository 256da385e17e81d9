"""Issue 33 item 2: a batch with a Failed run is a Failed batch, in Prefect and in the exit code.

`toolwire batch` runs two replayed librarian runs (one answers, one hits a
terminal provider fault) on Prefect's temporary server with a private
PREFECT_HOME; its SQLite database is then read directly: the batch's flow run
and the task that ran the Failed run are FAILED with the counts in the message,
the other task COMPLETED. A Prefect that cannot start is one line, no traceback.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_batch import librarian_inputs, write_script

pytestmark = pytest.mark.local


def _toolwire(*args: str | Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        env=clean | {"PREFECT_HOME": str(home)} | env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _states(home: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(flow name, state type, message) of every flow run; (task name, ...) of every task run."""
    con = sqlite3.connect(home / "prefect.db")
    try:
        flows = con.execute(
            "SELECT f.name, r.state_type, s.message FROM flow_run r "
            "JOIN flow f ON f.id = r.flow_id JOIN flow_run_state s ON s.id = r.state_id"
        ).fetchall()
        tasks = con.execute(
            "SELECT t.task_key, t.state_type, s.message FROM task_run t "
            "JOIN task_run_state s ON s.id = t.state_id WHERE t.name LIKE 'batch-runs%'"
        ).fetchall()
    finally:
        con.close()
    return flows, tasks


def test_a_batch_with_a_failed_run_is_failed_in_prefect_and_exits_1(tmp_path: Path) -> None:
    spec, (ws,), good, _ = librarian_inputs(tmp_path, 1)
    broken = write_script(tmp_path / "broken.jsonl", [])
    (tmp_path / "broken.jsonl").write_text('{"fault": "error"}\n', encoding="utf-8")
    home = tmp_path / "prefect-home"
    db = tmp_path / "batch.duckdb"
    ran = _toolwire(
        "batch", spec, "-w", ws, "--models", f"{good},{broken}", "--db", db, "--dry-run",
        "--no-check", home=home,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    assert "planned 2, finished 2 (1 Failed, 0 unchecked), lost 0" in ran.stderr
    assert "Traceback" not in ran.stderr

    flows, tasks = _states(home)
    (batch,) = [f for f in flows if f[0] == "toolwire-batch"]
    assert batch[1] == "FAILED", flows
    assert batch[2].startswith("planned 2, finished 2 (1 Failed, 0 unchecked), lost 0"), batch
    assert sorted(t[1] for t in tasks) == ["COMPLETED", "FAILED"], tasks
    (failed,) = [t for t in tasks if t[1] == "FAILED"]
    assert failed[2] == "1 of 1 runs failed (LLM_PROVIDER_ERROR)", failed


def test_a_batch_whose_prefect_cannot_start_says_so_in_one_line(tmp_path: Path) -> None:
    spec, (ws,), good, _ = librarian_inputs(tmp_path, 1)
    ran = _toolwire(
        "batch", spec, "-w", ws, "--models", good, "--db", tmp_path / "b.duckdb", "--dry-run",
        home=tmp_path / "prefect-home",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="0",
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    lines = [line for line in ran.stderr.splitlines() if "PREFECT_UNAVAILABLE" in line]
    assert len(lines) == 1 and "Prefect could not start" in lines[0], ran.stderr[-3000:]


def test_a_run_whose_prefect_cannot_start_says_so_in_one_line(tmp_path: Path) -> None:
    spec, (ws,), _, _ = librarian_inputs(tmp_path, 1)
    ran = _toolwire(
        "run", spec, "--workspace", ws, "--db", tmp_path / "r.duckdb", "--prefect",
        home=tmp_path / "prefect-home",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="0",
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    (line,) = [line for line in ran.stderr.splitlines() if "PREFECT_UNAVAILABLE" in line]
    assert "Prefect could not start" in line and "--no-prefect" in line, line
    assert "stdout:" not in line and "stderr:" not in line  # the server's output stays out
