"""Data-quality checks over the store, evaluated as SQL inside DuckDB.

Each check has a stable dotted name (``runs.spec_hash_is_64_hex``) so a failure
names what broke, in the CLI, in the ``quality_checks`` table and in tests. The
suites (``quality_checks``) are written in Great Expectations' vocabulary (not
null, in set, unique, between), and each expectation is one SQL predicate here:
one aggregate query per frame counts the rows that break each check, and only a
failing check reads its few sample rows. GE itself ran them at 9x the time and 3.5x
the memory of the same counts in plain SQL (its import alone is 3-4 s; 7-8 s, 342 MB
against 0.6-1.0 s, 97 MB, issue 47); ``bench/check_store_sql.py`` measures both.

Referential checks ("no operation without its run") are a LEFT JOIN in the
frame's SQL plus a not-null expectation on the joined key.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

from toolwire.errors import StoreError
from toolwire.store.quality_checks import CHECKS, FRAMES, Check
from toolwire.store.sandbox import time_bound
from toolwire.store.shards import store_write

if TYPE_CHECKING:
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
    error: str | None = None  # the check could not be evaluated (counts as a failure)

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
    """NaN and other non-JSON values -> plain JSON values."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def unexpected_sql(check: Check) -> str:
    """The SQL predicate a row of the check's frame breaks it by (GE's semantics: only
    the not-null check counts NULLs; the others skip them)."""
    column = _ident(check.kwargs["column"])
    kind = check.expectation
    if kind == "ExpectColumnValuesToNotBeNull":
        return f"{column} IS NULL"
    if kind == "ExpectColumnValuesToBeInSet":
        values = ", ".join(_literal(v) for v in check.kwargs["value_set"])
        return f"{column} IS NOT NULL AND {column} NOT IN ({values})"
    if kind == "ExpectColumnValuesToBeBetween":
        bounds = []
        if check.kwargs.get("min_value") is not None:
            bounds.append(f"{column} < {_literal(check.kwargs['min_value'])}")
        if check.kwargs.get("max_value") is not None:
            bounds.append(f"{column} > {_literal(check.kwargs['max_value'])}")
        return f"{column} IS NOT NULL AND ({' OR '.join(bounds) or 'FALSE'})"
    if kind == "ExpectColumnValuesToBeUnique":
        return f"{column} IS NOT NULL AND {_ident(_dup_column(check))} > 1"
    raise StoreError(f"check {check.name}: no SQL for expectation {kind}")


def _dup_column(check: Check) -> str:
    return f"__count_of_{check.kwargs['column']}"


def _frame_sql(frame_name: str, frame_checks: list[Check]) -> str:
    """The frame's rows, with a per-value count for each uniqueness check."""
    sql = FRAMES[frame_name][0]
    counts = [
        f"count(*) OVER (PARTITION BY {_ident(c.kwargs['column'])}) AS {_ident(_dup_column(c))}"
        for c in frame_checks
        if c.expectation == "ExpectColumnValuesToBeUnique"
    ]
    return f"SELECT *{''.join(', ' + c for c in counts)} FROM ({sql})"


def run_checks(
    con: duckdb.DuckDBPyConnection,
    checks: Sequence[Check] = CHECKS,
    *,
    timeout_s: float | None = None,
) -> QualityReport:
    """Evaluate ``checks`` inside DuckDB, on the database ``con`` is connected to: one
    scan per frame counts every check's broken rows; a failing check reads up to five.

    ``timeout_s`` bounds the whole evaluation (a store's view may be endless): DuckDB
    is interrupted and the result is StoreError ``SQL_TIMEOUT``.
    """
    results: list[ExpectationResult] = []
    bound = nullcontext() if timeout_s is None else time_bound(con, timeout_s, "the checks")
    with bound:
        for frame_name in dict.fromkeys(c.frame for c in checks):
            frame_checks = [c for c in checks if c.frame == frame_name]
            results += _evaluate_frame(con, frame_name, frame_checks)
    order = {c.name: i for i, c in enumerate(checks)}
    results.sort(key=lambda r: order[r.name])
    return QualityReport(
        check_id=uuid.uuid4().hex,
        checked_at=datetime.now(UTC).replace(tzinfo=None),
        results=tuple(results),
    )


def _evaluate_frame(
    con: duckdb.DuckDBPyConnection, frame_name: str, frame_checks: list[Check]
) -> list[ExpectationResult]:
    """One aggregate over the frame; a check whose SQL fails is evaluated alone, and
    reported as could-not-evaluate when it still fails (a frame that cannot be read at
    all, a damaged file, is a StoreError naming the frame)."""
    frame = _frame_sql(frame_name, frame_checks)
    counts = ", ".join(f"count(*) FILTER (WHERE {unexpected_sql(c)})" for c in frame_checks)
    try:
        row = con.execute(f"SELECT count(*), {counts} FROM ({frame})").fetchone()
    except duckdb.Error as exc:
        if _damage(str(exc)) is not None or isinstance(exc, duckdb.InterruptException):
            raise StoreError(f"quality frame {frame_name!r}: {exc}") from exc
        return [_evaluate_alone(con, frame_name, check) for check in frame_checks]
    assert row is not None
    total = int(row[0])
    return [
        _result(con, frame_name, frame, check, total, int(n))
        for check, n in zip(frame_checks, row[1:], strict=True)
    ]


def _evaluate_alone(
    con: duckdb.DuckDBPyConnection, frame_name: str, check: Check
) -> ExpectationResult:
    frame = _frame_sql(frame_name, [check])
    try:
        row = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {unexpected_sql(check)}) FROM ({frame})"
        ).fetchone()
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.InterruptException):
            raise
        return _outcome(check, 0, 0, error=" ".join(str(exc).split())[:300])
    assert row is not None
    return _result(con, frame_name, frame, check, int(row[0]), int(row[1]))


def _result(
    con: duckdb.DuckDBPyConnection, frame_name: str, frame: str, check: Check, total: int, bad: int
) -> ExpectationResult:
    sample: list[dict[str, Any]] = []
    if bad:
        shown = dict.fromkeys([*FRAMES[frame_name][1], check.kwargs["column"]])
        cursor = con.execute(
            f"SELECT {', '.join(map(_ident, shown))} FROM ({frame}) "
            f"WHERE {unexpected_sql(check)} LIMIT {_SAMPLE_ROWS}"
        )
        names = [d[0] for d in cursor.description or []]
        sample = [_json_safe(dict(zip(names, r, strict=True))) for r in cursor.fetchall()]
    return _outcome(check, total, bad, sample=sample)


def _outcome(
    check: Check,
    total: int,
    bad: int,
    *,
    sample: list[dict[str, Any]] | None = None,
    error: str | None = None,
) -> ExpectationResult:
    return ExpectationResult(
        name=check.name,
        table=check.name.split(".", 1)[0],
        description=check.description,
        success=error is None and bad == 0,
        checked_rows=total,
        unexpected_count=bad,
        sample=sample or [],
        error=error,
    )


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
