"""The DuckDB store on real files: writers, views, atomicity, locking, threads, migrations, CLI."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from toolwire.cli import store_cmds
from toolwire.domain import Attempt, Operation, OperationOutcome
from toolwire.errors import RunNotFound, StoreError, StoreLocked, UsageError
from toolwire.store import LATEST_VERSION, Store, schema
from toolwire.store.rows import operation_rows

pytestmark = pytest.mark.local


# -- builders ------------------------------------------------------------------------------


def attempt(
    turn: int,
    n: int,
    ok: bool,
    *,
    tokens: tuple[int, int] = (10, 5),
    raw: str = "<librarian_response/>",
) -> Attempt:
    return Attempt(
        turn=turn,
        attempt=n,
        kind="initial" if n == 0 else "repair",
        request_id=f"req-{turn}",
        prompt=[{"role": "user", "content": f"turn {turn}"}],
        raw_text=raw,
        parse_ok=ok,
        error_code=None if ok else "LIBRARIAN_PARSE_FAILED",
        error_codes=() if ok else ("MISSING_TAG:summary", "INVALID_STATUS"),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        latency_ms=100.0,
        finish_reason="stop",
        started_at=1_700_000_000.5,
    )


def outcome(turn: int, seq: int, status: str) -> OperationOutcome:
    op = Operation(f"op-{turn}-{seq}", "retag_note", None, f"n{seq}.md", "T", "b", "r", 0.75)
    return OperationOutcome(turn=turn, seq=seq, operation=op, status=status)  # type: ignore[arg-type]


def call(turn: int, seq: int, ms: float, status: str = "success") -> dict[str, object]:
    return {
        "turn": turn,
        "seq": seq,
        "tool": "read_note",
        "source": "xml",
        "status": status,
        "duration_ms": ms,
        "args_bytes": 20 + seq,
        "result_bytes": 100,
    }


def start(store: Store, run_id: str, **extra: object) -> None:
    row = {"run_id": run_id, "spec_name": "librarian", "job": "librarian"}
    row |= {"transport": "xml_attrless", "provider": "llamacpp", "model": "smollm2"}
    store.start_run(row | extra)


def finish(store: Store, run_id: str, **kw: object) -> None:
    args: dict[str, object] = dict(
        status="ok",
        error_code=None,
        error_message=None,
        turns=1,
        operations=[],
        tool_calls=[],
        report_markdown=None,
    )
    store.finish_run(run_id, **(args | kw))  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "sub" / "toolwire.duckdb")


def count(store: Store, sql: str, params: list[object] | None = None) -> int:
    return int(store.query(sql, params)[1][0][0])


# -- schema --------------------------------------------------------------------------------


def test_fresh_store_has_schema_version_and_empty_views(store: Store) -> None:
    assert store.path.parent.is_dir()
    assert store.schema_version() == LATEST_VERSION
    for view in ("run_summary", "tool_stats", "repair_stats"):
        columns, rows = store.query(f"SELECT * FROM {view}")
        assert rows == [] and columns
    applied = "SELECT count(*) FROM schema_version WHERE applied_at IS NOT NULL"
    assert count(store, applied) == len(schema.MIGRATIONS)


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("runs", schema.RUN_COLUMNS),
        ("attempts", schema.ATTEMPT_COLUMNS),
        ("tool_calls", schema.TOOL_CALL_COLUMNS),
        ("operations", schema.OPERATION_COLUMNS),
    ],
)
def test_tables_have_the_declared_columns(store: Store, table: str, columns: tuple[str]) -> None:
    _, rows = store.query(f"SELECT name FROM pragma_table_info('{table}') ORDER BY cid")
    assert [r[0] for r in rows] == list(columns)


def test_reopening_an_existing_file_applies_nothing(store: Store) -> None:
    store.schema_version()
    _, before = store.query("SELECT version, applied_at FROM schema_version")
    again = Store(store.path)
    assert again.schema_version() == LATEST_VERSION
    assert again.query("SELECT version, applied_at FROM schema_version")[1] == before


def test_a_file_from_a_newer_toolwire_is_refused(store: Store) -> None:
    store.schema_version()
    con = duckdb.connect(str(store.path))
    con.execute("INSERT INTO schema_version VALUES (?, now())", [LATEST_VERSION + 1])
    con.close()
    with pytest.raises(StoreError, match="newer than this toolwire supports"):
        Store(store.path).query("SELECT 1")


def test_new_migrations_apply_forward_and_a_failing_one_rolls_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.schema_version()
    released = list(schema.MIGRATIONS)
    latest = released[-1][0]
    broken = (latest + 1, "CREATE TABLE extra (x INTEGER); SELECT * FROM nope;")
    monkeypatch.setattr(schema, "MIGRATIONS", [*released, broken])
    with pytest.raises(StoreError, match="cannot migrate"):
        Store(store.path).query("SELECT 1")

    monkeypatch.setattr(schema, "MIGRATIONS", released)
    assert Store(store.path).schema_version() == latest
    assert count(store, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'extra'") == 0

    extra = (latest + 1, "CREATE TABLE extra (x INT)")
    monkeypatch.setattr(schema, "MIGRATIONS", [*released, extra])
    upgraded = Store(store.path)
    assert upgraded.schema_version() == latest + 1
    assert count(upgraded, "SELECT count(*) FROM extra") == 0
    assert count(upgraded, "SELECT count(*) FROM schema_version") == latest + 1


def test_version_4_adds_operation_bodies_and_keeps_older_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = list(schema.MIGRATIONS)
    monkeypatch.setattr(schema, "MIGRATIONS", released[:3])  # a file written by toolwire 3
    old = Store(tmp_path / "old.duckdb")
    start(old, "r-old")
    old_row = operation_rows("r-old", [outcome(0, 0, "applied")]).drop_columns(["body_markdown"])
    with old._transaction("v3 operations") as con:  # the v3 writer's columns
        old._insert_arrow(con, "operations", old_row)
    assert old.schema_version() == 3

    monkeypatch.setattr(schema, "MIGRATIONS", released[:4])
    new = Store(old.path)
    assert new.schema_version() == 4
    start(new, "r-new")
    finish(new, "r-new", operations=[outcome(0, 0, "applied")])
    _, rows = new.query("SELECT run_id, title, body_markdown FROM operations ORDER BY run_id")
    assert rows == [("r-new", "T", "b"), ("r-old", "T", None)]


# -- writers and views ---------------------------------------------------------------------


def test_specs_and_packs_are_stored_once_per_hash(store: Store) -> None:
    for _ in range(2):
        store.record_spec("s1", "librarian", "1", "name: librarian\n", '{"name":"librarian"}')
        store.record_pack("p1", '{"pack_version":"1"}', {"plan.json": ("h1", b"\x00{}")})
    assert count(store, "SELECT count(*) FROM specs") == 1
    assert count(store, "SELECT count(*) FROM prompt_packs") == 1
    assert store.query("SELECT name, sha256, content FROM prompt_pack_files")[1] == [
        ("plan.json", "h1", b"\x00{}")
    ]


def test_a_hand_built_run_lands_and_the_views_compute_it(store: Store) -> None:
    start(store, "run-a", started_at=datetime(2024, 1, 1, 12, 0, 0), settings_json={"t": 0})
    turns = [  # turn 1: repaired on the 2nd repair; turn 2: first try; turn 3: never valid
        [False, False, True],
        [True],
        [False, False, False],
    ]
    for turn, oks in enumerate(turns, start=1):
        for n, ok in enumerate(oks):
            store.record_attempt("run-a", attempt(turn, n, ok, tokens=(10 * (n + 1), n + 1)))
    ops = [outcome(1, 0, "applied"), outcome(1, 1, "applied"), outcome(2, 0, "rejected")]
    ops.append(outcome(2, 1, "deferred"))
    calls = [call(1, 0, 10.0), call(1, 1, 20.0), call(2, 0, 30.0), call(2, 1, 40.0, "failure")]
    finish(store, "run-a", turns=3, operations=ops, tool_calls=calls, report_markdown="# A")
    start(store, "run-b", model="other", transport="xct")
    store.record_attempt("run-b", attempt(1, 0, True))

    cols, rows = store.query("SELECT * FROM run_summary WHERE run_id = 'run-a'")
    a = dict(zip(cols, rows[0], strict=True))
    assert (a["status"], a["turns"], a["attempts"], a["repairs"]) == ("ok", 3, 7, 4)
    assert a["first_try_valid_turns"] == 1
    # Tokens: initial (10, 1), repair 1 (20, 2), repair 2 (30, 3).
    assert (a["input_tokens"], a["output_tokens"]) == (60 + 10 + 60, 6 + 1 + 6)
    assert (a["ops_applied"], a["ops_rejected"], a["ops_deferred"], a["tool_calls"]) == (2, 1, 1, 4)
    assert a["duration_s"] == pytest.approx((a["ended_at"] - a["started_at"]).total_seconds())

    cols, rows = store.query("SELECT * FROM repair_stats WHERE model = 'smollm2'")
    r = dict(zip(cols, rows[0], strict=True))
    assert (r["turns"], r["first_try_valid"], r["repairs"]) == (3, 1, 4)
    assert r["first_try_valid_rate"] == pytest.approx(1 / 3)
    assert r["repair_rate"] == pytest.approx(4 / 3)
    assert (r["repaired_turns"], r["failed_turns"]) == (1, 1)
    assert r["repair_tokens"] == (20 + 2 + 30 + 3) * 2
    other = store.query("SELECT turns, first_try_valid_rate FROM repair_stats WHERE model='other'")
    assert other[1] == [(1, 1.0)]

    cols, rows = store.query("SELECT * FROM tool_stats")
    t = dict(zip(cols, rows[0], strict=True))
    assert (t["tool"], t["source"], t["calls"], t["failures"]) == ("read_note", "xml", 4, 1)
    assert t["failure_rate"] == pytest.approx(0.25)
    assert t["p50_ms"] == pytest.approx(25.0)
    assert t["p95_ms"] == pytest.approx(38.5)
    assert t["avg_args_bytes"] == pytest.approx(20.5)

    row = store.query(
        "SELECT prompt_json, error_codes, started_at FROM attempts WHERE turn = 1 AND attempt = 0"
    )[1][0]
    assert json.loads(row[0]) == [{"role": "user", "content": "turn 1"}]
    assert row[1] == ["MISSING_TAG:summary", "INVALID_STATUS"]
    assert row[2] == datetime(2023, 11, 14, 22, 13, 20, 500000)  # unix 1_700_000_000.5, UTC
    assert store.query("SELECT markdown FROM reports")[1] == [("# A",)]
    assert store.get_run("run-a")["settings_json"] == '{"t": 0}'


def test_finish_run_is_atomic(store: Store) -> None:
    start(store, "run-x")
    store.record_attempt("run-x", attempt(1, 0, True))
    dup = [outcome(1, 0, "applied"), outcome(1, 0, "applied")]  # same (run, turn, seq)
    with pytest.raises(StoreError, match="finish_run run-x failed: ConstraintException"):
        finish(store, "run-x", operations=dup, tool_calls=[call(1, 0, 1.0)], report_markdown="#")
    for table in ("operations", "tool_calls", "reports"):
        assert count(store, f"SELECT count(*) FROM {table}") == 0
    run = store.get_run("run-x")
    assert (run["status"], run["ended_at"]) == ("running", None)
    assert count(store, "SELECT count(*) FROM attempts") == 1  # earlier attempts survive
    # The same run can then finish properly, and only once.
    finish(store, "run-x", operations=dup[:1], status="Failed", error_code="E", error_message="m")
    assert store.get_run("run-x")["status"] == "Failed"
    with pytest.raises(StoreError, match="already finished"):
        finish(store, "run-x")


def test_writers_refuse_unknown_runs_and_bad_values(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.record_attempt("nope", attempt(1, 0, True))
    with pytest.raises(RunNotFound):
        finish(store, "nope")
    with pytest.raises(StoreError, match=r"unknown runs columns \['colour'\]"):
        store.start_run({"run_id": "r", "colour": "red"})
    start(store, "r")
    with pytest.raises(StoreError, match="start_run failed"):
        start(store, "r")  # duplicate primary key
    with pytest.raises(StoreError, match="status must be one of ok, unchecked, Failed"):
        finish(store, "r", status="done")


def test_mark_operations_undone_flips_only_applied(store: Store) -> None:
    start(store, "r")
    ops = [outcome(1, 0, "applied"), outcome(1, 1, "applied"), outcome(1, 2, "rejected")]
    finish(store, "r", operations=ops)
    assert store.mark_operations_undone("r") == 2
    assert store.mark_operations_undone("r") == 0
    _, rows = store.query("SELECT status, count(*) FROM operations GROUP BY 1 ORDER BY 1")
    assert rows == [("rejected", 1), ("undone", 2)]


def test_get_run_takes_a_unique_prefix_and_run_ids_are_newest_first(store: Store) -> None:
    start(store, "abc-1", started_at=datetime(2024, 1, 1))
    start(store, "abc-2", started_at=datetime(2024, 1, 2), status="ok")
    assert store.get_run("abc-1")["run_id"] == "abc-1"
    assert store.get_run("abc-2")["started_at"] == datetime(2024, 1, 2)
    with pytest.raises(UsageError, match="ambiguous: abc-1, abc-2"):
        store.get_run("abc")
    for missing in ("zzz", "%", ""):
        with pytest.raises(RunNotFound):
            store.get_run(missing)
    assert store.run_ids() == ["abc-2", "abc-1"]
    assert store.run_ids(status="running") == ["abc-1"]
    assert store.run_ids(limit=1) == ["abc-2"]


def test_query_is_read_only(store: Store) -> None:
    start(store, "r")
    for sql in ("DELETE FROM runs", "DROP TABLE runs", "SELECT 1; UPDATE runs SET turns = 9"):
        with pytest.raises(StoreError, match="SQL is read-only"):
            store.query(sql)
    with pytest.raises(StoreError, match=r'^STORE_ERROR: SQL error: Parser Error: .*"selec"$'):
        store.query("selec 1")
    assert store.query("SELECT run_id, turns FROM runs")[1] == [("r", 0)]


def test_bulk_operations_go_in_through_arrow(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 100_000
    ops = [outcome(i // 1000, i % 1000, "applied" if i % 4 else "rejected") for i in range(n)]
    calls = [call(i // 1000, i % 1000, float(i % 7)) for i in range(20_000)]

    def no_executemany(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows must not be written one by one")

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "executemany", no_executemany)
    start(store, "big")
    finish(store, "big", operations=ops, tool_calls=calls)
    _, rows = store.query("SELECT ops_applied, ops_rejected, tool_calls FROM run_summary")
    assert rows == [(75_000, 25_000, 20_000)]
    assert count(store, "SELECT count(DISTINCT operation_id) FROM operations") == n


# -- concurrency ---------------------------------------------------------------------------

HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()  # hold the file until told to let go
con.close()
print("released", flush=True)
"""


def test_another_process_holding_the_file(store: Store) -> None:
    start(store, "before")  # the file exists and our process holds nothing afterwards
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin and holder.stdout
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked, match="locked by another process") as info:
            start(Store(store.path, lock_timeout_s=0.5), "blocked")
        assert str(store.path) in str(info.value) and "--db" in str(info.value)

        errors: list[BaseException] = []

        def patient_write() -> None:
            try:
                start(Store(store.path, lock_timeout_s=60), "after")
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        writer = threading.Thread(target=patient_write)
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive()  # it cannot finish while the other process holds the file
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        writer.join(timeout=60)
        assert not writer.is_alive() and errors == []
    finally:
        holder.kill()
        holder.wait()
    assert sorted(store.run_ids()) == ["after", "before"]


def test_eight_threads_write_four_hundred_runs_through_one_store(store: Store) -> None:
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(50):
                run_id = f"t{k}-{i}"
                start(store, run_id)
                finish(store, run_id, operations=[outcome(1, 0, "applied")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _, rows = store.query("SELECT count(*), count(*) FILTER (WHERE status = 'ok') FROM runs")
    assert rows == [(400, 400)]
    assert count(store, "SELECT count(*) FROM operations") == 400


# -- CLI -----------------------------------------------------------------------------------


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    store_cmds.register(app)
    return app


@pytest.fixture
def filled(store: Store) -> Store:
    start(store, "run-one", started_at=datetime(2024, 5, 1, 9, 30))
    store.record_attempt("run-one", attempt(1, 0, False, raw="[bold]not markup[/bold] :smile:"))
    store.record_attempt("run-one", attempt(1, 1, True))
    finish(store, "run-one", operations=[outcome(1, 0, "applied")], report_markdown="# r")
    start(store, "run-two", started_at=datetime(2024, 5, 2, 9, 30))
    return store


def test_cli_runs_lists_newest_first(cli: typer.Typer, filled: Store) -> None:
    result = CliRunner().invoke(cli, ["runs", "--db", str(filled.path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.index("run-two") < result.stdout.index("run-one")
    line = next(x for x in result.stdout.splitlines() if "run-one" in x)
    assert "05-01 09:30:00" in line and "ok" in line and "2/1" in line and "1/0/0" in line
    limited = CliRunner().invoke(cli, ["runs", "--db", str(filled.path), "--limit", "1"])
    assert "run-two" in limited.stdout and "run-one" not in limited.stdout


def test_cli_db_defaults_to_the_environment(cli: typer.Typer, filled: Store) -> None:
    result = CliRunner().invoke(cli, ["runs"], env={"TOOLWIRE_DB": str(filled.path)})
    assert result.exit_code == 0 and "run-two" in result.stdout


def test_cli_show_prints_header_attempts_operations_and_raw(
    cli: typer.Typer, filled: Store
) -> None:
    result = CliRunner().invoke(cli, ["show", "run-o", "--db", str(filled.path), "--raw"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "run run-one  ok" in out
    assert "llamacpp:smollm2 via xml_attrless" in out
    assert "FAIL" in out and "LIBRARIAN_PARSE_FAILED" in out and "MISSING_TAG:summary" in out
    assert "retag_note" in out and "applied" in out
    assert "[bold]not markup[/bold] :smile:" in out  # raw text printed verbatim
    plain = CliRunner().invoke(cli, ["show", "run-one", "--db", str(filled.path)])
    assert "not markup" not in plain.stdout


@pytest.mark.parametrize(("run_id", "code"), [("nope", "RUN_NOT_FOUND"), ("run-", "USAGE_ERROR")])
def test_cli_show_errors(cli: typer.Typer, filled: Store, run_id: str, code: str) -> None:
    result = CliRunner().invoke(cli, ["show", run_id, "--db", str(filled.path)])
    assert result.exit_code == (2 if code == "USAGE_ERROR" else 1)
    assert result.stderr.count("\n") == 1 and f"error: {code}:" in result.stderr


SQL = "SELECT run_id, status, turns, started_at FROM runs ORDER BY run_id"


def test_cli_sql_formats(cli: typer.Typer, filled: Store) -> None:
    db = ["--db", str(filled.path)]
    as_json = CliRunner().invoke(cli, ["sql", SQL, *db, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [
        {"run_id": "run-one", "status": "ok", "turns": 1, "started_at": "2024-05-01T09:30:00"},
        {"run_id": "run-two", "status": "running", "turns": 0, "started_at": "2024-05-02T09:30:00"},
    ]
    as_csv = CliRunner().invoke(cli, ["sql", SQL, *db, "--format", "csv"])
    assert list(csv.reader(io.StringIO(as_csv.stdout))) == [
        ["run_id", "status", "turns", "started_at"],
        ["run-one", "ok", "1", "2024-05-01T09:30:00"],
        ["run-two", "running", "0", "2024-05-02T09:30:00"],
    ]
    table = CliRunner().invoke(cli, ["sql", SQL, *db])
    assert table.exit_code == 0 and "started_at" in table.stdout and "run-two" in table.stdout


@pytest.mark.parametrize(
    ("sql", "message"),
    [("selec 1", "SQL error: Parser Error"), ("DELETE FROM runs", "SQL is read-only")],
)
def test_cli_sql_errors_are_one_line(
    cli: typer.Typer, filled: Store, sql: str, message: str
) -> None:
    result = CliRunner().invoke(cli, ["sql", sql, "--db", str(filled.path)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert result.stdout == ""


def test_cli_missing_store_file_is_an_error_not_a_new_file(
    cli: typer.Typer, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.duckdb"
    result = CliRunner().invoke(cli, ["runs", "--db", str(missing)])
    assert result.exit_code == 1 and "no store file at" in result.stderr
    assert not missing.exists()
