"""What the store must show: the frames the quality checks read (one SQL query per
checked table) and every named expectation on them, in Great Expectations' words.
``quality`` evaluates each as a SQL predicate inside DuckDB.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.domain import OPERATION_KINDS, REORGANIZE_KINDS, TRANSPORTS
from toolwire.store.schema import OPERATION_STATUSES, RUN_STATUSES

__all__ = ["ATTEMPT_KINDS", "CHECKS", "FRAMES", "TOOL_CALL_STATUSES", "Check"]

_HEX64 = "[0-9a-f]{64}"  # regexp_full_match: the whole value
# tool_calls.status as toolwire.tools.executor records it: invalid = refused, never ran.
TOOL_CALL_STATUSES: tuple[str, ...] = ("success", "failure", "invalid")
# first_tool: the side request that picks a grammar run's first tool (agent.first_tool).
ATTEMPT_KINDS: tuple[str, ...] = ("initial", "repair", "first_tool")

# One frame per checked table: (SQL, columns that identify a row in failure samples).
FRAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "runs": (
        f"""SELECT r.run_id, r.spec_hash, r.pack_hash, r.status, r.transport,
                  s.spec_hash AS stored_spec_hash,
                  regexp_full_match(r.spec_hash, '{_HEX64}') AS spec_hash_is_hex,
                  regexp_full_match(r.pack_hash, '{_HEX64}') AS pack_hash_is_hex
           FROM runs r LEFT JOIN specs s ON s.spec_hash = r.spec_hash""",
        ("run_id",),
    ),
    "attempts": (
        """SELECT a.run_id, a.turn, a.attempt, a.kind,
                  length(a.raw_text) AS raw_text_chars, r.run_id AS run_found,
                  CASE a.kind WHEN 'initial' THEN a.attempt = 0
                              WHEN 'repair' THEN a.attempt > 0
                              WHEN 'first_tool' THEN a.attempt = -1
                  END AS number_fits_kind
           FROM attempts a LEFT JOIN runs r ON r.run_id = a.run_id""",
        ("run_id", "turn", "attempt"),
    ),
    # Budget per turn: 1 + the run's spec constraints.max_repair_retries (default 2). A
    # first_tool side request is not a try of the turn's answer: the budget leaves it out.
    "attempt_turns": (
        """SELECT a.run_id, a.turn, count(*) AS attempts,
                  count(*) - 1 - coalesce(TRY_CAST(json_extract_string(
                      any_value(s.canonical_json), '$.constraints.max_repair_retries')
                      AS INTEGER), 2) AS attempts_over_budget
           FROM attempts a
           LEFT JOIN runs r ON r.run_id = a.run_id
           LEFT JOIN specs s ON s.spec_hash = r.spec_hash
           WHERE a.kind <> 'first_tool'
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


def _all_true(name: str, frame: str, column: str, what: str) -> Check:
    return Check(
        name, frame, "ExpectColumnValuesToBeInSet", {"column": column, "value_set": [True]}, what
    )


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
    _all_true("runs.spec_hash_is_64_hex", "runs", "spec_hash_is_hex", "spec hashes are sha256 hex"),
    _not_null("runs.pack_hash_present", "runs", "pack_hash", "every run has a pack hash"),
    _all_true("runs.pack_hash_is_64_hex", "runs", "pack_hash_is_hex", "pack hashes are sha256 hex"),
    _not_null("runs.spec_stored", "runs", "stored_spec_hash", "every run's spec YAML is stored"),
    _in_set("runs.status_in_enum", "runs", "status", RUN_STATUSES, "run statuses"),
    _in_set("runs.transport_in_enum", "runs", "transport", TRANSPORTS, "transports"),
    _run_exists("attempts"),
    _not_null(
        "attempts.raw_text_present", "attempts", "raw_text_chars", "every attempt keeps its text"
    ),
    _in_set("attempts.kind_in_enum", "attempts", "kind", ATTEMPT_KINDS, "attempt kinds"),
    # The key (run_id, turn, attempt) stays unique only while each kind keeps its numbers:
    # initial 0, repairs 1.., first_tool -1 (an unknown kind is kind_in_enum's to flag).
    _all_true(
        "attempts.number_fits_kind",
        "attempts",
        "number_fits_kind",
        "attempt numbers: initial 0, repair 1.., first_tool -1",
    ),
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
    _in_set(
        "operations.kind_in_enum",
        "operations",
        "kind",
        OPERATION_KINDS + REORGANIZE_KINDS,
        "op kinds",
    ),
    _run_exists("tool_calls"),
    _in_set(
        "tool_calls.status_in_enum", "tool_calls", "status", TOOL_CALL_STATUSES, "tool statuses"
    ),
)
