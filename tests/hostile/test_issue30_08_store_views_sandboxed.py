"""Issue #30 item 8: a store file's own SQL (views, the tables it swaps for views) runs sandboxed.

A store from elsewhere can define ``run_summary`` (or ``schema_version``, or
``runs`` itself) as a view that calls ``read_text()`` on a local file. On the
main of 2026-11-25 ``toolwire runs`` printed such a file and ``report --html``
put it in the page: only ``toolwire sql`` ran in the sandbox. Here every
command that reads a store (``runs``, ``show``, ``report --html``, ``export``,
``check-store``) meets three hostile stores; the secret never reaches its
output or any file it writes, and each command either works or fails with one
line (the read refused), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from hostile.tally import Tally
from hostile.test_issue16_sql import _store
from toolwire.cli import app

AREA = "issue 30 #8: store views sandboxed"
SENTINEL = "SENTINEL-view-7a1c"


def _real_store(path: Path) -> Path:
    return _store(path).path


def _hostile(path: Path, secret: Path, kind: str) -> Path:
    """A real store whose SQL objects read ``secret`` (the attacker ships this file)."""
    _real_store(path)
    read = f"(SELECT content FROM read_text('{secret}'))"
    con = duckdb.connect(str(path))
    try:
        if kind == "run_summary":  # shown by runs, show and report --html
            con.execute("ALTER VIEW run_summary RENAME TO run_summary_0")
            con.execute(
                f"CREATE VIEW run_summary AS SELECT * REPLACE ({read} AS spec_name) "
                "FROM run_summary_0"
            )
        elif kind == "schema_version":  # read by every command that opens a store
            con.execute("ALTER TABLE schema_version RENAME TO schema_version_0")
            con.execute(
                "CREATE VIEW schema_version AS SELECT version, applied_at FROM schema_version_0 "
                f"WHERE {read} IS NOT NULL OR error('leak:' || {read}) IS NULL"
            )
        elif kind == "runs":  # the table check-store and export read, made a view
            con.execute("ALTER TABLE runs RENAME TO runs_0")
            con.execute(f"CREATE VIEW runs AS SELECT * REPLACE ({read} AS run_id) FROM runs_0")
    finally:
        con.close()
    return path


def _commands(db: Path, out: Path) -> dict[str, list[str]]:
    return {
        "runs": ["runs", "--db", str(db)],
        "runs json": ["runs", "--db", str(db), "--format", "json"],
        "show": ["show", "run-1", "--db", str(db), "--format", "json"],
        "report --html": ["report", "--db", str(db), "--html", str(out / "page.html")],
        "export": ["export", "--db", str(db), "--parquet", str(out / "parquet")],
        "check-store": ["check-store", "--db", str(db), "--format", "json"],
    }


def _written(out: Path) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file()
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["run_summary", "schema_version", "runs"])
def test_item_8_every_read_of_a_store_runs_its_sql_sandboxed(
    tmp_path: Path, tally: Tally, kind: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SENTINEL + "\n")
    db = _hostile(tmp_path / f"{kind}.duckdb", secret, kind)
    for name, args in _commands(db, tmp_path / "out").items():
        (tmp_path / "out").mkdir(exist_ok=True)
        result = CliRunner().invoke(app, args)
        tally.add(AREA, "inputs tried")
        out = result.stdout + result.stderr + _written(tmp_path / "out")
        escaped = SENTINEL in out
        tally.add(AREA, "files read through a view", int(escaped))
        assert not escaped, f"{kind}/{name}: the store's SQL read a file: {out[-600:]}"
        assert "Traceback" not in out, (kind, name, out[-2000:])
        if result.exit_code != 0 and name != "check-store":
            assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, (
                kind, name, result.stderr,
            )  # fmt: skip
            tally.add(AREA, "refused with one line")


@pytest.mark.timeout(300)
def test_item_8_a_plain_store_still_reads_through_every_command(
    tmp_path: Path, tally: Tally
) -> None:
    db = _real_store(tmp_path / "plain.duckdb")
    out = tmp_path / "out"
    out.mkdir()
    for name, args in _commands(db, out).items():
        result = CliRunner().invoke(app, args)
        tally.add(AREA, "inputs tried")
        if name == "check-store":  # a bare store fails checks (no spec row), none errs
            results = json.loads(result.stdout)["results"]
            assert results and not [r for r in results if r["error"]], result.stdout
            continue
        assert result.exit_code == 0, (name, result.output)
    assert (out / "page.html").stat().st_size > 0
    assert (out / "parquet" / "runs.parquet").is_file()
    rows = duckdb.sql(f"SELECT run_id FROM '{out / 'parquet' / 'runs.parquet'}'").fetchall()
    assert rows == [("run-1",)]
