"""Issue #16, the SQL and store holes: ``toolwire sql`` reads the store and nothing else.

Items 1, 9 and 23. Every statement below worked on the main of 2026-11-24
(deleting the store's rows through ``--dataset``, writing and reading any
file through ``--db``, running the SQL files of a folder through ``IMPORT
DATABASE``, creating a store at a mistyped ``--db``). Each is tried through
the real command on both ``--db`` and ``--dataset``; after each, the store
holds every row and view it had, and no file appeared or changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hostile.tally import Tally
from toolwire.cli import app
from toolwire.domain import Operation, OperationOutcome
from toolwire.store import Store

AREA = "issue 16: sql sandbox"


def _store(path: Path) -> Store:
    store = Store(path)
    row = {"run_id": "run-1", "spec_name": "librarian", "job": "librarian"}
    store.start_run(row | {"transport": "xml_attrless", "provider": "replay", "model": "m"})
    op = Operation("op-1", "retag_note", None, "n.md", "T", "cooking", "r", 0.75)
    store.finish_run(
        "run-1", status="ok", error_code=None, error_message=None, turns=1,
        operations=[OperationOutcome(turn=0, seq=0, operation=op, status="applied")],
        tool_calls=[], report_markdown="# report",
    )  # fmt: skip
    return store


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".wal")
    }


def _sql(*args: str) -> Any:
    return CliRunner().invoke(app, ["sql", *args])


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    data = tmp_path / "data"
    data.mkdir()
    store = _store(data / "store.duckdb")
    shards = tmp_path / "shards"
    shards.mkdir()
    _store(shards / "s0.duckdb")
    other = _store(tmp_path / "other.duckdb").path  # a store neither command was given
    importable = tmp_path / "importable"  # what EXPORT DATABASE writes: IMPORT runs it
    importable.mkdir()
    (importable / "schema.sql").write_text(
        "CREATE TABLE pwned AS SELECT 1 AS x;\n"
        f"COPY (SELECT 'imported') TO '{tmp_path / 'import-wrote.csv'}';\n"
    )
    (importable / "load.sql").write_text("")
    secret = tmp_path / "secret.txt"
    secret.write_text("SENTINEL-sql-1d2e\n")
    return {"tmp": tmp_path, "db": store.path, "shards": shards, "imp": importable,
            "secret": secret, "other": other}  # fmt: skip


ATTACKS = [
    # item 1: through --dataset the real store was attached and emptied
    "ATTACH '{db}' AS m; DELETE FROM m.operations; DROP VIEW m.run_summary",
    "ATTACH '{other}' AS m (READ_ONLY); SELECT * FROM m.runs",
    # item 9: files written, read or run
    "COPY runs TO '{tmp}/copied.csv'",
    "COPY (SELECT 1) TO '{tmp}/copied.parquet' (FORMAT parquet, USE_TMP_FILE false)",
    "EXPORT DATABASE '{tmp}/exported'",
    "IMPORT DATABASE '{imp}'",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM glob('{tmp}/*')",
    "SELECT * FROM '{secret}'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true; SELECT * FROM read_text('{secret}')",
    "SET lock_configuration = false",
]
# Changes to the store's own tables: refused on --db (a read-only file). On --dataset
# the tables are views in the command's own memory: they may change there, and are
# gone when the command ends; the files stay byte for byte what they were.
STORE_WRITES = [
    "DELETE FROM operations",
    "DROP VIEW run_summary",
    "UPDATE runs SET status = 'Failed'",
    "INSERT INTO runs (run_id) VALUES ('forged')",
    "CREATE TABLE forged AS SELECT 1",
    "ALTER TABLE runs ADD COLUMN forged INT",
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["--db", "--dataset"])
def test_items_1_and_9_sql_cannot_write_attach_copy_export_import_or_read_files(
    where: str, world: dict[str, Path], tally: Tally
) -> None:
    before = _digest(world["tmp"])
    target = [where, str(world["db"] if where == "--db" else world["shards"])]
    refused = 0
    for attack in ATTACKS:
        sql = attack.format(**world)
        result = _sql(sql, *target)
        out = result.stdout + result.stderr
        assert "SENTINEL" not in out, (sql, out)
        if "SELECT * FROM m.runs" in sql and result.exit_code == 0:
            pytest.fail(f"{sql!r} read an attached file: {out}")
        assert result.exit_code == 1, (sql, out)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, out
        refused += 1
    for sql in STORE_WRITES:
        result = _sql(sql, *target)
        if where == "--db":
            assert result.exit_code == 1 and "SQL_NOT_ALLOWED" in result.stderr, (sql, result)
            refused += 1
    assert _digest(world["tmp"]) == before  # no file written, the store unchanged
    assert not (world["tmp"] / "import-wrote.csv").exists()
    # Reads still work, and the store still has its rows and views.
    ok = _sql("SELECT run_id, status FROM run_summary", *target, "--format", "csv")
    assert ok.exit_code == 0 and "run-1,ok" in ok.stdout, ok.output
    ops = _sql("SELECT count(*) AS n FROM operations", *target, "--format", "csv")
    assert ops.stdout.splitlines()[-1] == "1"
    temp = _sql("CREATE TEMP TABLE t AS SELECT 1 AS x; SELECT x FROM t", *target, "-f", "csv")
    assert temp.exit_code == 0 and temp.stdout.splitlines()[-1] == "1"  # in memory, allowed
    tally.add(AREA, "inputs tried", len(ATTACKS) + len(STORE_WRITES))
    tally.add(AREA, "rejected with a code", refused)
    tally.add(AREA, "rows lost", 1 - int(ops.stdout.splitlines()[-1]))


@pytest.mark.timeout(120)
def test_sandbox_refusals_carry_their_own_code(world: dict[str, Path], tally: Tally) -> None:
    result = _sql(f"SELECT * FROM read_text('{world['secret']}')", "--db", str(world["db"]))
    assert "error: SQL_NOT_ALLOWED:" in result.stderr, result.stderr
    result = _sql("DELETE FROM runs", "--db", str(world["db"]))
    assert "error: SQL_NOT_ALLOWED: SQL is read-only" in result.stderr, result.stderr
    tally.add(AREA, "inputs tried", 2)
    tally.add(AREA, "rejected with a code", 2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command",
    [
        ["undo", "run-1", "--workspace", "{tmp}"],
        ["runs"],
        ["show", "run-1"],
        ["sql", "SELECT 1"],
    ],
    ids=["undo", "runs", "show", "sql"],
)
def test_item23_a_mistyped_db_is_an_error_and_no_new_store(
    command: list[str], world: dict[str, Path], tally: Tally
) -> None:
    typo = world["tmp"] / "dta" / "store.duckdb"
    args = [c.format(**world) for c in command] + ["--db", str(typo)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    result = subprocess.run(  # the real entry point: its one-line error handling included
        [sys.executable, "-m", "toolwire", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: STORE_ERROR: no store file at"), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not typo.exists() and not typo.parent.exists()
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "rejected with a code")
