"""What the page shows, read from the store in one place (all SQL of the report is here).

Every query is scoped by a list parameter, ``list_contains(?::VARCHAR[], run_id)``, so
the page covers exactly the selected runs. Per model/transport figures are computed
here, in DuckDB; rendering never aggregates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolwire.errors import RunNotFound

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = ["DEFAULT_LIMIT", "NO_TOOL", "ReportData", "collect_report", "plural", "run_state"]

DEFAULT_LIMIT = 200
# The label of tool_calls rows with no tool: a reply refused as a whole (XCT_INVALID,
# EXECUTE_INVALID, MULTIPLE_DECISIONS) or a leaked call that could not be read.
NO_TOOL = "(reply refused, no tool named)"
_FINAL_TOOL = "agent__final_report"
_DIFF = re.compile(r"## Changes\n\n```diff\n(.*)\n```\s*$", re.DOTALL)
_IN = "list_contains(?::VARCHAR[], run_id)"

_RUNS_SQL = """
SELECT s.run_id, s.started_at, s.spec_name, s.spec_hash, s.provider, s.model, s.transport,
       s.status, s.error_code, s.turns, s.attempts, s.repairs, s.first_try_valid_turns,
       s.input_tokens, s.output_tokens, s.ops_applied, s.ops_rejected, s.ops_deferred,
       s.tool_calls, s.duration_s, r.batch_id, r.job, r.dry_run, r.error_message, r.workspace,
       (SELECT count(*) FROM operations o WHERE o.run_id = s.run_id AND o.status = 'undone')
           AS ops_undone
FROM run_summary s JOIN runs r USING (run_id)
WHERE list_contains(?::VARCHAR[], s.run_id)
ORDER BY s.started_at, s.run_id
"""
# One row per provider/model/transport: pass/fail per run, validity and repairs per turn.
_COMPARE_SQL = f"""
WITH per_turn AS (
    SELECT run_id, turn, bool_or(kind = 'initial' AND parse_ok) AS first_ok,
           count(*) FILTER (WHERE kind = 'repair') AS repairs
    FROM attempts WHERE {_IN} GROUP BY run_id, turn
), per_run AS (
    SELECT run_id, count(*) AS turns, count(*) FILTER (WHERE first_ok) AS first_ok,
           sum(repairs) AS repairs
    FROM per_turn GROUP BY run_id
)
SELECT r.provider, r.model, r.transport, count(*) AS runs,
       count(*) FILTER (WHERE r.status = 'ok') AS ok,
       count(*) FILTER (WHERE r.status = 'Failed') AS failed,
       count(*) FILTER (WHERE r.status = 'running') AS running,
       coalesce(sum(p.turns), 0)::BIGINT AS turns,
       coalesce(sum(p.first_ok), 0)::BIGINT AS first_try_valid,
       coalesce(sum(p.repairs), 0)::BIGINT AS repairs,
       median(epoch(r.ended_at) - epoch(r.started_at)) AS median_run_s
FROM runs r LEFT JOIN per_run p USING (run_id)
WHERE list_contains(?::VARCHAR[], r.run_id)
GROUP BY ALL ORDER BY r.provider, r.model, r.transport
"""
_LATENCY_SQL = """
SELECT r.provider, r.model, r.transport, count(*) AS attempts,
       quantile_cont(a.latency_ms, 0.5) AS p50_ms, quantile_cont(a.latency_ms, 0.95) AS p95_ms,
       sum(a.input_tokens)::BIGINT AS input_tokens, sum(a.output_tokens)::BIGINT AS output_tokens
FROM attempts a JOIN runs r USING (run_id)
WHERE list_contains(?::VARCHAR[], a.run_id)
GROUP BY ALL
"""
# Durations only of calls that ran (a refused call or the final report never runs a tool).
_TOOLS_SQL = f"""
SELECT coalesce(tool, '{NO_TOOL}') AS tool, count(*) AS calls,
       count(*) FILTER (WHERE status = 'success') AS ok,
       count(*) FILTER (WHERE status = 'failure') AS failed,
       count(*) FILTER (WHERE status IS DISTINCT FROM 'success'
                        AND status IS DISTINCT FROM 'failure') AS refused,
       quantile_cont(duration_ms, 0.5) FILTER (WHERE ran) AS p50_ms,
       quantile_cont(duration_ms, 0.95) FILTER (WHERE ran) AS p95_ms
FROM (SELECT *, status IN ('success', 'failure') AND tool IS DISTINCT FROM '{_FINAL_TOOL}'
                AS ran
      FROM tool_calls WHERE {_IN})
GROUP BY 1 ORDER BY 1
"""
_ATTEMPTS_SQL = f"""
SELECT run_id, turn, attempt, kind, prompt_json, raw_text, parse_ok, error_code, error_codes,
       input_tokens, output_tokens, latency_ms, finish_reason
FROM attempts WHERE {_IN} ORDER BY run_id, turn, attempt
"""
_CALLS_SQL = f"""
SELECT run_id, turn, seq, slot, tool, command, source, status, duration_ms, args_bytes,
       result_bytes, error, args_json, result_text
FROM tool_calls WHERE {_IN} ORDER BY run_id, seq
"""
_OPS_SQL = f"""
SELECT run_id, turn, seq, operation_id, kind, target, title, status, code, confidence,
       coalesce(detail, reason) AS why
FROM operations WHERE {_IN} ORDER BY run_id, turn, seq
"""
_CHANGES_SQL = f"""
SELECT run_id, path, field, old_value, new_value
FROM note_changes WHERE {_IN} ORDER BY run_id, seq
"""
_REPORTS_SQL = f"SELECT run_id, markdown FROM reports WHERE {_IN}"

Rows = list[dict[str, Any]]


@dataclass
class ReportData:
    """Everything the page shows; per-run lists are keyed by run id."""

    title: str
    store_path: str
    runs: Rows
    compare: Rows  # per provider/model/transport, latency and tokens merged in
    tools: Rows
    attempts: dict[str, Rows]
    calls: dict[str, Rows]
    operations: dict[str, Rows]
    diffs: dict[str, str]
    changes: dict[str, Rows]


def run_state(run: dict[str, Any]) -> str:
    """The run's status, and ``undone`` when its applied changes were taken back."""
    return f"{run['status']}, undone" if run.get("ops_undone") else str(run["status"])


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _records(store: Store, sql: str, params: list[Any]) -> Rows:
    columns, rows = store.query(sql, params)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _by_run(rows: Rows) -> dict[str, Rows]:
    grouped: dict[str, Rows] = {}
    for row in rows:
        grouped.setdefault(row["run_id"], []).append(row)
    return grouped


def _select_runs(
    store: Store, run_id: str | None, batch_id: str | None, limit: int
) -> tuple[list[str], str]:
    if run_id:
        full = store.get_run(run_id)["run_id"]
        return [full], f"run {full}"
    if batch_id:
        _, rows = store.query(
            "SELECT run_id FROM runs WHERE batch_id = ? ORDER BY started_at", [batch_id]
        )
        if not rows:
            raise RunNotFound(f"no runs of batch {batch_id!r} in {store.path}")
        return [r[0] for r in rows], f"batch {batch_id} ({plural(len(rows), 'run')})"
    ids = store.run_ids(limit=limit)
    return ids, f"latest {plural(len(ids), 'run')}"


def _ratio(part: Any, whole: Any) -> float | None:
    return float(part) / float(whole) if whole else None


def _compare(store: Store, ids: list[str]) -> Rows:
    """Per provider/model/transport: the comparison row with its rates and latency."""
    latency = {
        (r["provider"], r["model"], r["transport"]): r for r in _records(store, _LATENCY_SQL, [ids])
    }
    rows = _records(store, _COMPARE_SQL, [ids, ids])
    for row in rows:
        lat = latency.get((row["provider"], row["model"], row["transport"]), {})
        row.update({k: lat.get(k) for k in ("attempts", "p50_ms", "p95_ms")})
        row.update({k: lat.get(k) for k in ("input_tokens", "output_tokens")})
        row["pass_rate"] = _ratio(row["ok"], row["ok"] + row["failed"])
        row["first_try_rate"] = _ratio(row["first_try_valid"], row["turns"])
        row["repairs_per_turn"] = _ratio(row["repairs"], row["turns"])
    return rows


def collect_report(
    store: Store,
    *,
    run_id: str | None = None,
    batch_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> ReportData:
    """Read one run, one batch, or the newest ``limit`` runs for the page."""
    ids, scope = _select_runs(store, run_id, batch_id, limit)
    diffs = {}
    for row in _records(store, _REPORTS_SQL, [ids]):
        match = _DIFF.search(row["markdown"] or "")
        if match:
            diffs[row["run_id"]] = match.group(1)
    return ReportData(
        title=f"toolwire report: {scope}",
        store_path=str(store.path),
        runs=_records(store, _RUNS_SQL, [ids]),
        compare=_compare(store, ids),
        tools=_records(store, _TOOLS_SQL, [ids]),
        attempts=_by_run(_records(store, _ATTEMPTS_SQL, [ids])),
        calls=_by_run(_records(store, _CALLS_SQL, [ids])),
        operations=_by_run(_records(store, _OPS_SQL, [ids])),
        diffs=diffs,
        changes=_by_run(_records(store, _CHANGES_SQL, [ids])),
    )
