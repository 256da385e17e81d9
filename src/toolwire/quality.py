"""Data-quality checks over the store, as Great Expectations suites on pandas frames.

Each check has a stable dotted name (``runs.spec_hash_is_64_hex``) so a failure
names what broke, in the CLI, in the ``quality_checks`` table and in tests.
Frames are read from DuckDB with plain SQL and handed to GE as pandas
DataFrames: GE's SQL route through duckdb-engine fails silently (every
expectation ``success=False``), see STACK.md. Referential checks ("no
operation without its run") are a LEFT JOIN in the frame's SQL plus a
not-null expectation on the joined key.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from toolwire.domain import OPERATION_KINDS, TRANSPORTS
from toolwire.errors import StoreError
from toolwire.store.schema import OPERATION_STATUSES, RUN_STATUSES

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = [
    "ATTEMPT_KINDS",
    "CHECKS",
    "TOOL_CALL_STATUSES",
    "Check",
    "ExpectationResult",
    "QualityReport",
    "check_store",
    "record_quality",
    "run_checks",
]

QueryFn = Callable[[str], tuple[list[str], list[tuple[Any, ...]]]]

_HEX64 = r"^[0-9a-f]{64}$"
_SAMPLE_ROWS = 5
# tool_calls.status as toolwire.tools.executor records it: invalid = refused, never ran.
TOOL_CALL_STATUSES: tuple[str, ...] = ("success", "failure", "invalid")
ATTEMPT_KINDS: tuple[str, ...] = ("initial", "repair")

# One frame per checked table: (SQL, columns that identify a row in failure samples).
FRAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "runs": (
        """SELECT r.run_id, r.spec_hash, r.pack_hash, r.status, r.transport,
                  s.spec_hash AS stored_spec_hash
           FROM runs r LEFT JOIN specs s ON s.spec_hash = r.spec_hash""",
        ("run_id",),
    ),
    "attempts": (
        """SELECT a.run_id, a.turn, a.attempt, a.kind,
                  length(a.raw_text) AS raw_text_chars, r.run_id AS run_found
           FROM attempts a LEFT JOIN runs r ON r.run_id = a.run_id""",
        ("run_id", "turn", "attempt"),
    ),
    # Budget per turn: 1 + the run's spec constraints.max_repair_retries (default 2).
    "attempt_turns": (
        """SELECT a.run_id, a.turn, count(*) AS attempts,
                  count(*) - 1 - coalesce(TRY_CAST(json_extract_string(
                      any_value(s.canonical_json), '$.constraints.max_repair_retries')
                      AS INTEGER), 2) AS attempts_over_budget
           FROM attempts a
           LEFT JOIN runs r ON r.run_id = a.run_id
           LEFT JOIN specs s ON s.spec_hash = r.spec_hash
           GROUP BY a.run_id, a.turn""",
        ("run_id", "turn"),
    ),
    "operations": (
        """SELECT o.run_id, o.turn, o.seq, o.kind, o.status, o.confidence,
                  r.run_id AS run_found
           FROM operations o LEFT JOIN runs r ON r.run_id = o.run_id""",
        ("run_id", "turn", "seq"),
    ),
    "tool_calls": (
        """SELECT t.run_id, t.turn, t.seq, t.tool, t.status, r.run_id AS run_found
           FROM tool_calls t LEFT JOIN runs r ON r.run_id = t.run_id""",
        ("run_id", "turn", "seq"),
    ),
}


@dataclass(frozen=True, slots=True)
class Check:
    """One named expectation: a GE class (by name) and its arguments, on one frame."""

    name: str
    frame: str
    expectation: str
    kwargs: dict[str, Any]
    description: str


def _in_set(name: str, frame: str, column: str, values: Sequence[str], what: str) -> Check:
    kwargs = {"column": column, "value_set": list(values)}
    return Check(name, frame, "ExpectColumnValuesToBeInSet", kwargs, what)


def _not_null(name: str, frame: str, column: str, what: str) -> Check:
    return Check(name, frame, "ExpectColumnValuesToNotBeNull", {"column": column}, what)


def _run_exists(frame: str) -> Check:
    return _not_null(f"{frame}.run_exists", frame, "run_found", f"no {frame} row without its run")


CHECKS: tuple[Check, ...] = (
    Check(
        "runs.run_id_unique",
        "runs",
        "ExpectColumnValuesToBeUnique",
        {"column": "run_id"},
        "one row per run",
    ),
    _not_null("runs.spec_hash_present", "runs", "spec_hash", "every run has a spec hash"),
    Check(
        "runs.spec_hash_is_64_hex",
        "runs",
        "ExpectColumnValuesToMatchRegex",
        {"column": "spec_hash", "regex": _HEX64},
        "spec hashes are sha256 hex",
    ),
    _not_null("runs.pack_hash_present", "runs", "pack_hash", "every run has a pack hash"),
    Check(
        "runs.pack_hash_is_64_hex",
        "runs",
        "ExpectColumnValuesToMatchRegex",
        {"column": "pack_hash", "regex": _HEX64},
        "pack hashes are sha256 hex",
    ),
    _not_null("runs.spec_stored", "runs", "stored_spec_hash", "every run's spec YAML is stored"),
    _in_set("runs.status_in_enum", "runs", "status", RUN_STATUSES, "run statuses"),
    _in_set("runs.transport_in_enum", "runs", "transport", TRANSPORTS, "transports"),
    _run_exists("attempts"),
    _not_null(
        "attempts.raw_text_present", "attempts", "raw_text_chars", "every attempt keeps its text"
    ),
    _in_set("attempts.kind_in_enum", "attempts", "kind", ATTEMPT_KINDS, "attempt kinds"),
    Check(
        "attempts.per_turn_within_repair_budget",
        "attempt_turns",
        "ExpectColumnValuesToBeBetween",
        {"column": "attempts_over_budget", "max_value": 0},
        "attempts per turn <= 1 + max_repair_retries",
    ),
    _run_exists("operations"),
    Check(
        "operations.confidence_in_0_1",
        "operations",
        "ExpectColumnValuesToBeBetween",
        {"column": "confidence", "min_value": 0.0, "max_value": 1.0},
        "confidences in [0, 1]",
    ),
    _in_set("operations.status_in_enum", "operations", "status", OPERATION_STATUSES, "op statuses"),
    _in_set("operations.kind_in_enum", "operations", "kind", OPERATION_KINDS, "operation kinds"),
    _run_exists("tool_calls"),
    _in_set(
        "tool_calls.status_in_enum", "tool_calls", "status", TOOL_CALL_STATUSES, "tool statuses"
    ),
)


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
    import logging

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


def run_checks(query: QueryFn, checks: Sequence[Check] = CHECKS) -> QualityReport:
    """Evaluate ``checks`` on frames read with ``query(sql) -> (columns, rows)``."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    import pandas as pd

    context = _gx_context()
    source = context.data_sources.add_pandas("toolwire")
    results: list[ExpectationResult] = []
    for frame_name in dict.fromkeys(c.frame for c in checks):
        sql, index_columns = FRAMES[frame_name]
        try:
            columns, rows = query(sql)
        except StoreError as exc:
            raise StoreError(f"quality frame {frame_name!r}: {exc.message}") from exc
        frame = pd.DataFrame.from_records(rows, columns=columns)
        batch = (
            source.add_dataframe_asset(name=frame_name)
            .add_batch_definition_whole_dataframe("all")
            .get_batch(batch_parameters={"dataframe": frame})
        )
        frame_checks = [c for c in checks if c.frame == frame_name]
        suite = gx.ExpectationSuite(name=f"toolwire.{frame_name}")
        for check in frame_checks:
            cls = getattr(gxe, check.expectation)
            suite.add_expectation(cls(**check.kwargs, meta={"name": check.name}))
        validation = batch.validate(
            suite,
            result_format={
                "result_format": "COMPLETE",
                "unexpected_index_column_names": list(index_columns),
                "partial_unexpected_count": _SAMPLE_ROWS,
            },
        )
        by_name = {c.name: c for c in frame_checks}
        for item in validation.results:
            check = by_name[item.expectation_config.meta["name"]]
            result = item.result or {}
            info = item.exception_info or {}
            error = info.get("exception_message") if info.get("raised_exception") else None
            sample = [_json_safe(r) for r in (result.get("unexpected_index_list") or [])]
            results.append(
                ExpectationResult(
                    name=check.name,
                    table=check.name.split(".", 1)[0],
                    description=check.description,
                    success=bool(item.success) and error is None,
                    checked_rows=len(frame),
                    unexpected_count=int(result.get("unexpected_count") or 0),
                    sample=sample[:_SAMPLE_ROWS],
                    error=error,
                )
            )
    order = {c.name: i for i, c in enumerate(checks)}
    results.sort(key=lambda r: order[r.name])
    return QualityReport(
        check_id=uuid.uuid4().hex,
        checked_at=datetime.now(UTC).replace(tzinfo=None),
        results=tuple(results),
    )


def check_store(store: Store, checks: Sequence[Check] = CHECKS) -> QualityReport:
    """Run every check on one store file (read-only)."""
    return run_checks(lambda sql: store.query(sql), checks)


def record_quality(store: Store, report: QualityReport, *, batch_id: str | None = None) -> None:
    """Append a report to the ``quality_checks`` table, one row per expectation."""
    from toolwire.store.shards import store_write

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
