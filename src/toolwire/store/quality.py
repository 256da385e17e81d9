"""Data-quality checks over the store: Great Expectations suites evaluated inside DuckDB.

Each check has a stable dotted name (``runs.spec_hash_is_64_hex``) so a failure
names what broke, in the CLI, in the ``quality_checks`` table and in tests.

GE runs on its SQL datasource (SQLAlchemy + duckdb-engine) over the store's own
connection, so DuckDB computes counts and a few sample rows: no table is pulled
into memory (it was: 5.3 s and 330 MB on a small store). Two things make that
route work, both found by reading why every expectation came back
``success=False`` with an IndexError inside (STACK.md):

- GE executes a query, closes the connection, *then* fetches the rows. DuckDB
  rolls the closed connection's transaction back and its pending result with it,
  so GE read ``[]``. :func:`_rows_fetched_before_close` makes GE fetch first
  (a scoped patch of ``SqlAlchemyExecutionEngine.execute_query``).
- GE has no regex expression for the DuckDB dialect. The two hash checks get a
  boolean column computed by DuckDB's ``regexp_full_match`` in the frame's SQL,
  expected to be true (NULLs are skipped, as GE's regex expectation skips them).

Referential checks ("no operation without its run") are a LEFT JOIN in the
frame's SQL plus a not-null expectation on the joined key.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from toolwire.errors import StoreError
from toolwire.store.quality_checks import CHECKS, FRAMES, Check
from toolwire.store.sandbox import SQL_TIMEOUT
from toolwire.store.shards import store_write

if TYPE_CHECKING:
    import duckdb

    from toolwire.store import Store

__all__ = [
    "CHECKS",
    "Check",
    "ExpectationResult",
    "QualityReport",
    "check_store",
    "record_quality",
    "run_checks",
]

_SAMPLE_ROWS = 5


@dataclass(frozen=True, slots=True)
class ExpectationResult:
    """What one check found: success, how many rows broke it, and a few of them."""

    name: str
    table: str
    description: str
    success: bool
    checked_rows: int
    unexpected_count: int
    sample: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # GE raised instead of evaluating (counts as a failure)

    def summary(self) -> str:
        """One line naming the check and what broke it."""
        if self.success:
            return f"ok    {self.name} ({self.checked_rows} rows)"
        if self.error:
            return f"FAIL  {self.name}: could not evaluate: {self.error}"
        shown = json.dumps(self.sample[:3], default=str, ensure_ascii=False)
        return (
            f"FAIL  {self.name}: {self.unexpected_count} of {self.checked_rows} rows "
            f"({self.description}); e.g. {shown}"
        )


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The outcome of one run of every check."""

    check_id: str
    checked_at: datetime
    results: tuple[ExpectationResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.success for r in self.results)

    @property
    def failures(self) -> list[ExpectationResult]:
        return [r for r in self.results if not r.success]


def _json_safe(value: Any) -> Any:
    """numpy scalars and NaN (pandas' NULL) -> plain JSON values."""
    if hasattr(value, "item") and not isinstance(value, list | dict | str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _gx_context() -> Any:
    import great_expectations as gx

    # GE pins this logger to INFO; an ephemeral context then logs "Created temporary
    # directory ... for ephemeral docs site" on every check.
    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")  # writes no files
    # GE draws progress bars on stderr by default: noise in a CLI and in logs.
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


@contextmanager
def _rows_fetched_before_close() -> Iterator[None]:
    """GE's SQL engine fetches a result after closing its connection; DuckDB drops a
    pending result when the connection's transaction ends, so GE read no rows and
    failed every expectation with an IndexError. Fetch inside the connection."""
    from great_expectations.execution_engine.sqlalchemy_execution_engine import (
        SqlAlchemyExecutionEngine,
    )

    original = SqlAlchemyExecutionEngine.execute_query

    def execute_query(self: Any, query: Any) -> Any:
        with self.get_connection() as connection:
            result = self._execute_query_with_recovery(connection, query)
            return result.freeze()()  # every row, readable after the close

    SqlAlchemyExecutionEngine.execute_query = execute_query  # type: ignore[method-assign]
    try:
        yield
    finally:
        SqlAlchemyExecutionEngine.execute_query = original  # type: ignore[method-assign]


def run_checks(
    con: duckdb.DuckDBPyConnection,
    checks: Sequence[Check] = CHECKS,
    *,
    timeout_s: float | None = None,
) -> QualityReport:
    """Evaluate ``checks`` inside DuckDB, on the database ``con`` is connected to.

    GE gets a SQLAlchemy engine whose every connection is a new cursor of ``con``
    (the same database, transaction and lock), never a second open of the file.
    ``timeout_s`` bounds the whole evaluation: a timer interrupts every cursor GE
    opened (interrupting ``con`` does not reach them), later ones are refused, and
    the result is StoreError ``SQL_TIMEOUT`` (a store's view may be endless).
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from duckdb_engine import ConnectionWrapper

    opened: list[duckdb.DuckDBPyConnection] = []
    fired = threading.Event()

    def cursor() -> Any:
        if fired.is_set():
            raise StoreError("the checks ran out of time", code=SQL_TIMEOUT)
        opened.append(con.cursor())
        return ConnectionWrapper(opened[-1])

    done = threading.Event()

    def watchdog() -> None:
        # GE catches an interrupted query and goes on to the next one on the same
        # cursor: keep interrupting until the evaluation has returned.
        if timeout_s is None or done.wait(timeout_s):
            return
        fired.set()
        while not done.is_set():
            for each in [con, *opened]:
                each.interrupt()
            done.wait(0.05)

    timer = threading.Thread(target=watchdog, daemon=True) if timeout_s else None
    if timer is not None:
        timer.start()
    timeout = StoreError(
        f"the checks stopped after {timeout_s} s (the time bound of reads of a store)",
        code=SQL_TIMEOUT,
    )
    try:
        report = _evaluate(con, checks, cursor, gx, gxe)
    except StoreError:
        if fired.is_set():  # a frame GE could not finish because the timer stopped it
            raise timeout from None
        raise
    finally:
        done.set()
    if fired.is_set():
        raise timeout
    return report


def _evaluate(
    con: duckdb.DuckDBPyConnection, checks: Sequence[Check], cursor: Any, gx: Any, gxe: Any
) -> QualityReport:
    context = _gx_context()
    # GE logs a failed query with its whole traceback at ERROR before it raises; the
    # failure is reported as the expectation's error (one line), never a traceback.
    gx_logger = logging.getLogger("great_expectations")
    level = gx_logger.level
    gx_logger.setLevel(logging.CRITICAL)
    source = context.data_sources.add_sql(
        "toolwire",
        connection_string="duckdb:///:memory:",  # dialect only: creator supplies connections
        kwargs={"creator": cursor},
    )
    results: list[ExpectationResult] = []
    try:
        with _rows_fetched_before_close():
            for frame_name in dict.fromkeys(c.frame for c in checks):
                frame_checks = [c for c in checks if c.frame == frame_name]
                results += _validate_frame(source, frame_name, frame_checks, gx, gxe)
    finally:
        engine = getattr(source, "_engine", None)  # GE's cached engine, if it made one
        if engine is not None:
            engine.dispose()  # close the cursors GE opened before `con` is released
        gx_logger.setLevel(level)
    order = {c.name: i for i, c in enumerate(checks)}
    results.sort(key=lambda r: order[r.name])
    return QualityReport(
        check_id=uuid.uuid4().hex,
        checked_at=datetime.now(UTC).replace(tzinfo=None),
        results=tuple(results),
    )


def _validate_frame(
    source: Any, frame_name: str, frame_checks: list[Check], gx: Any, gxe: Any
) -> list[ExpectationResult]:
    """One GE suite over one frame's SQL (a query asset: DuckDB evaluates it)."""
    sql, index_columns = FRAMES[frame_name]
    try:
        batch = (
            source.add_query_asset(name=frame_name, query=sql)
            .add_batch_definition_whole_table("all")
            .get_batch()
        )
        suite = gx.ExpectationSuite(name=f"toolwire.{frame_name}")
        for check in frame_checks:
            cls = getattr(gxe, check.expectation)
            suite.add_expectation(cls(**check.kwargs, meta={"name": check.name}))
        validation = batch.validate(
            suite,
            result_format={
                # SUMMARY, not COMPLETE: counts plus a few offending rows, never every one.
                "result_format": "SUMMARY",
                "unexpected_index_column_names": list(index_columns),
                "partial_unexpected_count": _SAMPLE_ROWS,
            },
        )
    except Exception as exc:  # noqa: BLE001 - GE wraps DuckDB errors in its own types
        # GE's message spans lines (the SQL, a link): check_store reads them for damage,
        # then shows one.
        raise StoreError(f"quality frame {frame_name!r}: {exc}") from exc
    by_name = {c.name: c for c in frame_checks}
    results = []
    for item in validation.results:
        check = by_name[item.expectation_config.meta["name"]]
        result = item.result or {}
        results.append(
            ExpectationResult(
                name=check.name,
                table=check.name.split(".", 1)[0],
                description=check.description,
                success=bool(item.success) and _error(item) is None,
                checked_rows=int(result.get("element_count") or 0),
                unexpected_count=int(result.get("unexpected_count") or 0),
                sample=[_json_safe(r) for r in (result.get("partial_unexpected_index_list") or [])][
                    :_SAMPLE_ROWS
                ],
                error=_error(item),
            )
        )
    return results


def _error(item: Any) -> str | None:
    """GE's exception for an expectation it could not evaluate (a failure, not a pass).

    ``exception_info`` is either one record or a mapping of metric id -> record.
    """
    info = item.exception_info or {}
    records = [info] if "raised_exception" in info else list(info.values())
    for record in records:
        if isinstance(record, dict) and record.get("raised_exception"):
            return str(record.get("exception_message") or "unknown GE error")
    return None


# DuckDB's words for a file it cannot read whole: truncated, half-written, overwritten.
_DAMAGE_MARKERS = (
    "could not read enough bytes",
    "corrupt database file",
    "not a valid duckdb database file",
    "io error",
)


def _damage(text: str | None) -> str | None:
    """The line of ``text`` that says the store file is damaged, if one does."""
    for line in (text or "").splitlines():
        if any(marker in line.lower() for marker in _DAMAGE_MARKERS):
            return re.sub(r"^\(_?duckdb\.\w+\)\s*", "", line.strip())
    return None


def _damaged(store: Store, reason: str) -> StoreError:
    return StoreError(
        f"store file {store.path} is damaged (truncated or half-written?): {reason[:300]}; "
        "no check could read it"
    )


def check_store(store: Store, checks: Sequence[Check] = CHECKS) -> QualityReport:
    """Run every check on one store file (read-only), through the store's own connection
    (its lock and its migrations).

    A damaged file (a half-written or truncated store) is one StoreError naming
    it, not a report of expectations that "could not evaluate" (issue #30 item 14).
    """
    # Store._connect is the store package's way in for its bookkeeping helpers too
    # (store.shards.store_write); it holds the file for the duration of the checks.
    limits = getattr(store, "limits", None)  # a SandboxedStore's bounds
    try:
        with store._connect(write=False) as con:
            report = run_checks(con, checks, timeout_s=getattr(limits, "timeout_s", None))
    except StoreError as exc:
        reason = _damage(exc.message)
        if reason is None:
            raise StoreError(" ".join(exc.message.split())[:1000], code=exc.code) from None
        raise _damaged(store, reason) from None
    for result in report.results:
        reason = _damage(result.error)
        if reason is not None:
            raise _damaged(store, reason)
    return report


def record_quality(store: Store, report: QualityReport, *, batch_id: str | None = None) -> None:
    """Append a report to the ``quality_checks`` table, one row per expectation."""
    rows = [
        [
            report.check_id,
            batch_id,
            r.name,
            r.table,
            r.success,
            r.checked_rows,
            r.unexpected_count,
            json.dumps(r.sample, default=str, ensure_ascii=False) if r.sample else r.error,
            report.checked_at,
        ]
        for r in report.results
    ]
    with store_write(store, "record_quality") as con:
        con.executemany(
            "INSERT INTO quality_checks (check_id, batch_id, expectation, table_name, success, "
            "checked_rows, unexpected_count, sample_json, checked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
