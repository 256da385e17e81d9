"""Issue #30 item 12: ``toolwire sql`` is bounded in time, memory and spill.

On the main of 2026-11-25 a long query held the store for as long as it ran
(a librarian run on the same file failed ``STORE_LOCKED``), and user SQL could
take DuckDB's default 80 % of RAM and spill to 90 % of the free disk beside
the store. Now a timer interrupts the query (``SQL_TIMEOUT``, one line), the
store is free again the moment it stops, and the memory and spill limits are
set before the configuration is locked (SQL cannot raise them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.store import Store

AREA = "issue 30 #12: sql bounds"
# Billions of rows of work: never finishes on its own within any test budget.
ENDLESS = "SELECT sum(hash(a.range * b.range)) FROM range(1000000) a, range(1000000) b"


def _toolwire(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip


def _store(path: Path) -> Path:
    store = Store(path)
    store.start_run({"run_id": "run-1", "spec_name": "s", "job": "librarian",
                     "transport": "xml_attrless", "provider": "replay", "model": "m"})  # fmt: skip
    return store.path


@pytest.mark.timeout(300)
def test_item_12_a_long_query_is_stopped_and_lets_go_of_the_store(
    tmp_path: Path, tally: Tally
) -> None:
    db = _store(tmp_path / "s.duckdb")
    for where in (["--db", str(db)], ["--dataset", str(db)]):
        done = _toolwire("sql", ENDLESS, *where, "--timeout", "3")
        tally.add(AREA, "inputs tried")
        assert done.returncode == 1, (where, done.stdout[-500:], done.stderr[-2000:])
        assert done.stderr.startswith("error: SQL_TIMEOUT: ") and done.stderr.count("\n") == 1, (
            done.stderr
        )
        tally.add(AREA, "stopped with one line")
    # While a long query runs, a writer waits; once the bound stops it, the write goes in.
    with subprocess.Popen(
        [sys.executable, "-m", "toolwire", "sql", ENDLESS, "--db", str(db), "--timeout", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        time.sleep(1.0)
        writer = Store(db, lock_timeout_s=120)
        writer.record_warnings("run-1", ["written after the query was stopped"])
        assert proc.wait(timeout=120) == 1
        assert proc.stderr is not None and "SQL_TIMEOUT" in proc.stderr.read()
    assert writer.run_warnings("run-1") == ["written after the query was stopped"]
    tally.add(AREA, "hung", 0)


@pytest.mark.timeout(300)
def test_item_12_memory_and_spill_are_bounded_and_locked(tmp_path: Path, tally: Tally) -> None:
    db = _store(tmp_path / "s.duckdb")
    shown = _toolwire(
        "sql", "SELECT current_setting('memory_limit') AS m, "
        "current_setting('max_temp_directory_size') AS t", "--db", str(db), "-f", "csv",
    )  # fmt: skip
    tally.add(AREA, "inputs tried")
    assert shown.returncode == 0, shown.stderr
    memory, spill = shown.stdout.splitlines()[1].split(",")
    assert memory.endswith("MiB") and float(memory.split()[0]) <= 1024, memory
    assert spill.endswith("MiB") and float(spill.split()[0]) <= 1024, spill
    for setting in ("memory_limit = '64GB'", "max_temp_directory_size = '1TB'",
                    "threads = 64", "temp_directory = '/tmp'"):  # fmt: skip
        raised = _toolwire("sql", f"SET {setting}", "--db", str(db))
        tally.add(AREA, "inputs tried")
        assert raised.returncode == 1 and "SQL_NOT_ALLOWED" in raised.stderr, raised.stderr
        tally.add(AREA, "rejected with a code")


@pytest.mark.timeout(300)
def test_item_12_check_store_on_an_endless_view_stops_at_its_bound(
    tmp_path: Path, tally: Tally
) -> None:
    """check-store reads ``runs``; a store that makes it an endless view is stopped too
    (GE's cursors are interrupted, not only the connection they came from)."""
    import duckdb

    from toolwire.errors import StoreError
    from toolwire.store.quality import check_store
    from toolwire.store.sandbox import SandboxedStore, SandboxLimits

    db = _store(tmp_path / "s.duckdb")
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE runs RENAME TO runs_0")
    con.execute(
        "CREATE VIEW runs AS SELECT r.* FROM runs_0 r, range(1000000) a, range(1000000) b "
        "WHERE hash(a.range * b.range) = 0"
    )
    con.close()
    store = SandboxedStore(db, limits=SandboxLimits(timeout_s=3))
    tally.add(AREA, "inputs tried")
    with pytest.raises(StoreError) as raised:
        check_store(store)
    assert raised.value.code == "SQL_TIMEOUT", raised.value
    tally.add(AREA, "stopped with one line")
