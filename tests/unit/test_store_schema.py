"""The store schema without DuckDB: migration bookkeeping, DDL vs column lists, Arrow rows."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from toolwire.domain import Operation, OperationOutcome
from toolwire.errors import StoreError
from toolwire.store import schema
from toolwire.store.rows import operation_rows, pack_file_rows, tool_call_rows

pytestmark = pytest.mark.unit

_TABLE_RE = re.compile(r"CREATE TABLE (\w+) \((.*?)\n\);", re.S)
_ADD_COLUMN_RE = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)")


def _ddl_columns() -> dict[str, list[str]]:
    """Column names per table, read from the DDL text of every migration."""
    tables: dict[str, list[str]] = {}
    for _, sql in schema.MIGRATIONS:
        for name, body in _TABLE_RE.findall(sql):
            cols = []
            for line in body.splitlines():
                word = line.strip().split(" ", 1)[0]
                if word and word != "PRIMARY" and not word.startswith("--"):
                    cols.append(word)
            tables[name] = cols
        for name, column in _ADD_COLUMN_RE.findall(sql):  # appended, as DuckDB does
            tables[name].append(column)
    return tables


def test_migrations_are_numbered_from_one_without_gaps() -> None:
    versions = [v for v, _ in schema.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert schema.LATEST_VERSION == versions[-1]


def test_pending_migrations_returns_only_newer_ones_in_order() -> None:
    migrations = [(1, "a"), (2, "b"), (3, "c")]
    assert schema.pending_migrations(0, migrations) == migrations
    assert schema.pending_migrations(1, migrations) == [(2, "b"), (3, "c")]
    assert schema.pending_migrations(3, migrations) == []
    assert schema.pending_migrations(schema.LATEST_VERSION) == []


def test_a_schema_newer_than_the_code_is_an_error() -> None:
    with pytest.raises(StoreError, match=r"version 4 is newer than this toolwire supports \(3\)"):
        schema.pending_migrations(4, [(1, "a"), (2, "b"), (3, "c")])


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("runs", schema.RUN_COLUMNS),
        ("attempts", schema.ATTEMPT_COLUMNS),
        ("tool_calls", schema.TOOL_CALL_COLUMNS),
        ("operations", schema.OPERATION_COLUMNS),
    ],
)
def test_column_lists_match_the_ddl(table: str, columns: tuple[str, ...]) -> None:
    assert _ddl_columns()[table] == list(columns)


def test_ddl_has_every_table_and_view_and_otel_names() -> None:
    tables = _ddl_columns()
    expected = {"specs", "prompt_packs", "prompt_pack_files", "runs", "attempts"}
    assert expected | {"tool_calls", "operations", "reports"} <= set(tables)
    # OpenTelemetry GenAI names, not home-made ones.
    assert {"input_tokens", "output_tokens", "finish_reason"} <= set(tables["attempts"])
    first = schema.MIGRATIONS[0][1]
    for view in ("run_summary", "tool_stats", "repair_stats"):
        assert f"CREATE OR REPLACE VIEW {view} AS" in first


def _outcome(seq: int, status: str = "applied") -> OperationOutcome:
    op = Operation(f"op{seq}", "retag_note", None, "notes/a.md", "A", "body", "why", 0.5)
    return OperationOutcome(turn=2, seq=seq, operation=op, status=status, path="notes/a.md")  # type: ignore[arg-type]


def test_operation_rows_have_the_table_columns_and_values() -> None:
    rows = operation_rows("run-1", [_outcome(0), _outcome(1, "rejected")])
    assert rows.column_names == list(schema.OPERATION_COLUMNS)
    assert rows.schema.field("turn").type == pa.int32()
    assert rows.column("target").to_pylist() == ["notes/a.md", "notes/a.md"]
    assert rows.column("status").to_pylist() == ["applied", "rejected"]
    assert rows.column("run_id").to_pylist() == ["run-1", "run-1"]


def test_tool_call_rows_fill_missing_keys_with_null() -> None:
    rows = tool_call_rows("r", [{"turn": 1, "seq": 0, "tool": "read", "duration_ms": 2}])
    assert rows.column_names == list(schema.TOOL_CALL_COLUMNS)
    assert rows.to_pylist()[0] == {
        "run_id": "r",
        "turn": 1,
        "seq": 0,
        "slot": None,
        "tool": "read",
        "command": None,
        "source": None,
        "status": None,
        "duration_ms": 2.0,
        "args_bytes": None,
        "result_bytes": None,
        "error": None,
        "args_json": None,
        "result_text": None,
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            {"turn": 1, "seq": 0, "tool": "x", "args": "{}"},
            r"tool_calls\[0\]: unknown columns \['args'\]",
        ),
        ({"turn": 1, "tool": "x"}, r"tool_calls\[0\]: turn and seq are required"),
    ],
)
def test_tool_call_rows_reject_bad_dicts(call: dict[str, object], message: str) -> None:
    with pytest.raises(StoreError, match=message):
        tool_call_rows("r", [call])


def test_pack_file_rows_keep_bytes_and_sort_by_name() -> None:
    rows = pack_file_rows("p", {"b.json": ("hb", b"\x00B"), "a.json": ("ha", b"A")})
    assert rows.to_pylist() == [
        {"pack_hash": "p", "name": "a.json", "sha256": "ha", "content": b"A"},
        {"pack_hash": "p", "name": "b.json", "sha256": "hb", "content": b"\x00B"},
    ]


def test_tool_call_rows_keep_model_text_with_a_lone_surrogate() -> None:
    """Arguments decoded from JSON can hold a lone surrogate: kept, escaped, row not lost."""
    call = {"turn": 0, "seq": 0, "args_json": '{"path": "\ud800.md"}', "result_text": "x\udfff"}
    row = tool_call_rows("r", [call]).to_pylist()[0]
    assert row["args_json"] == '{"path": "\\ud800.md"}' and row["result_text"] == "x\\udfff"
