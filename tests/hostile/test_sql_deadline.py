"""Issue 45 item 18: ``toolwire sql`` neither runs past its bound nor holds the store.

DuckDB checks its interrupt between vectors, not inside a scalar function: a query
such as ``list_sort(range(200000000))`` ran 243 s under ``--timeout 2``, and while it
ran its read-only connection held the store: a librarian run on the same file failed
``STORE_LOCKED``. Now the query runs on a copy of the store in a child process that is
killed at the bound, and a writer opens the store while a query runs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile.tally import Tally
from hostile.test_issue30_12_sql_bounds import ENDLESS, _store, _toolwire
from toolwire.store import Store

AREA = "issue 45 #18: sql deadline and the store"
# Work inside single function calls, where DuckDB's interrupt is not checked.
UNINTERRUPTIBLE = {
    "sort a 200M list": "SELECT list_sort(range(200000000))[1]",
    "repeat 800 MB": "SELECT length(repeat('ab', 400000000))",
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(UNINTERRUPTIBLE))
def test_a_query_inside_one_function_call_stops_at_the_bound(
    name: str, tmp_path: Path, tally: Tally
) -> None:
    db = _store(tmp_path / "s.duckdb")
    started = time.monotonic()
    try:
        done = _toolwire("sql", UNINTERRUPTIBLE[name], "--db", str(db), "--timeout", "2",
                         timeout=90)  # fmt: skip
    except subprocess.TimeoutExpired:
        tally.add(AREA, "hung", 1)
        pytest.fail(f"{name}: toolwire sql --timeout 2 still ran after 90 s")
    tally.note(AREA, f"{name}: --timeout 2 ended after {time.monotonic() - started:.1f} s")
    tally.add(AREA, "inputs tried")
    assert done.returncode == 1 and done.stderr.startswith("error: SQL_TIMEOUT: "), done.stderr
    assert done.stderr.count("\n") == 1
    tally.add(AREA, "stopped with one line")
    tally.add(AREA, "hung", 0)


@pytest.mark.timeout(300)
def test_a_running_query_does_not_hold_the_store(tmp_path: Path, tally: Tally) -> None:
    db = _store(tmp_path / "s.duckdb")
    with subprocess.Popen(
        [sys.executable, "-m", "toolwire", "sql", ENDLESS, "--db", str(db), "--timeout", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            time.sleep(8.0)  # the query is running (on its copy)
            assert proc.poll() is None
            writer = Store(db, lock_timeout_s=5)  # a run's write, while the query runs
            writer.record_warnings("run-1", ["written while a query ran"])
            assert writer.run_warnings("run-1") == ["written while a query ran"]
        finally:
            proc.kill()
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "runs failed", 0)
