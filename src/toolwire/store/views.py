"""Analysis views over the store: one row per run, per tool, per model/transport.

The views are part of migration 1 (``schema.MIGRATIONS``); a later change to a
view is a new migration with ``CREATE OR REPLACE VIEW``. Sums are cast to
BIGINT because DuckDB widens ``sum(INTEGER)`` to HUGEINT, which Arrow and
pandas consumers handle badly.
"""

from __future__ import annotations

__all__ = [
    "REPAIR_STATS_V1",
    "REPAIR_STATS_V2",
    "RUN_SUMMARY_V1",
    "RUN_SUMMARY_V2",
    "TOOL_STATS_V1",
    "VIEWS_V1",
]

# One row per run, including runs still 'running' (or crashed) with no attempts yet.
RUN_SUMMARY_V1 = """
CREATE OR REPLACE VIEW run_summary AS
WITH a AS (
    SELECT run_id,
           count(*)                                          AS attempts,
           count(*) FILTER (WHERE kind = 'repair')           AS repairs,
           count(*) FILTER (WHERE kind = 'initial' AND parse_ok) AS first_try_valid_turns,
           sum(input_tokens)::BIGINT                         AS input_tokens,
           sum(output_tokens)::BIGINT                        AS output_tokens
    FROM attempts GROUP BY run_id
), o AS (
    SELECT run_id,
           count(*) FILTER (WHERE status = 'applied')  AS ops_applied,
           count(*) FILTER (WHERE status = 'rejected') AS ops_rejected,
           count(*) FILTER (WHERE status = 'deferred') AS ops_deferred
    FROM operations GROUP BY run_id
), t AS (
    SELECT run_id, count(*) AS tool_calls FROM tool_calls GROUP BY run_id
)
SELECT r.run_id, r.spec_name, r.spec_hash, r.pack_hash, r.transport, r.provider, r.model,
       r.status, r.error_code, r.started_at, r.ended_at,
       epoch(r.ended_at) - epoch(r.started_at)  AS duration_s,
       r.turns,
       coalesce(a.attempts, 0)                  AS attempts,
       coalesce(a.repairs, 0)                   AS repairs,
       coalesce(a.first_try_valid_turns, 0)     AS first_try_valid_turns,
       a.input_tokens,
       a.output_tokens,
       coalesce(o.ops_applied, 0)               AS ops_applied,
       coalesce(o.ops_rejected, 0)              AS ops_rejected,
       coalesce(o.ops_deferred, 0)              AS ops_deferred,
       coalesce(t.tool_calls, 0)                AS tool_calls
FROM runs r
LEFT JOIN a USING (run_id)
LEFT JOIN o USING (run_id)
LEFT JOIN t USING (run_id);
"""

# A call counts as a failure unless its status is exactly 'success' (NULL = never finished).
TOOL_STATS_V1 = """
CREATE OR REPLACE VIEW tool_stats AS
SELECT tool, source,
       count(*)                                                       AS calls,
       count(*) FILTER (WHERE coalesce(status, '') <> 'success')      AS failures,
       (count(*) FILTER (WHERE coalesce(status, '') <> 'success'))::DOUBLE / count(*)
                                                                      AS failure_rate,
       quantile_cont(duration_ms, 0.5)                                AS p50_ms,
       quantile_cont(duration_ms, 0.95)                               AS p95_ms,
       avg(args_bytes)                                                AS avg_args_bytes,
       avg(result_bytes)                                              AS avg_result_bytes
FROM tool_calls
GROUP BY tool, source;
"""

# Per (provider, model, transport); a "turn" is one (run_id, turn) with >= 1 attempt.
# repair_rate = repair attempts per turn; repaired_turns = invalid first, valid after repair;
# failed_turns = no attempt parsed; repair_tokens = input + output tokens of repair attempts.
REPAIR_STATS_V1 = """
CREATE OR REPLACE VIEW repair_stats AS
WITH per_turn AS (
    SELECT run_id, turn,
           bool_or(kind = 'initial' AND parse_ok)          AS first_try_valid,
           bool_or(parse_ok)                               AS any_valid,
           count(*) FILTER (WHERE kind = 'repair')         AS repairs,
           sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))
               FILTER (WHERE kind = 'repair')              AS repair_tokens
    FROM attempts GROUP BY run_id, turn
)
SELECT r.provider, r.model, r.transport,
       count(*)                                                    AS turns,
       count(*) FILTER (WHERE t.first_try_valid)                   AS first_try_valid,
       (count(*) FILTER (WHERE t.first_try_valid))::DOUBLE / count(*) AS first_try_valid_rate,
       sum(t.repairs)::BIGINT                                      AS repairs,
       sum(t.repairs)::DOUBLE / count(*)                           AS repair_rate,
       count(*) FILTER (WHERE NOT t.first_try_valid AND t.any_valid) AS repaired_turns,
       count(*) FILTER (WHERE NOT t.any_valid)                     AS failed_turns,
       coalesce(sum(t.repair_tokens), 0)::BIGINT                   AS repair_tokens
FROM per_turn t
JOIN runs r USING (run_id)
GROUP BY r.provider, r.model, r.transport;
"""

VIEWS_V1 = RUN_SUMMARY_V1 + TOOL_STATS_V1 + REPAIR_STATS_V1


# Version 2 (migration "run_summary_planned"): what a dry run planned, and whether the run
# was one. A dry run's operations stay 'planned', so V1 showed it as 0/0/0 (issue 33).
# New columns go last: positional readers of V1 keep working.
def _extended(view: str, edits: dict[str, str]) -> str:
    """``view`` with each text replaced once: a later version of a view is written as
    its difference from the frozen earlier one (each must match, or this fails loudly)."""
    for old, new in edits.items():
        if view.count(old) != 1:
            raise ValueError(f"view edit does not match exactly once: {old!r}")
        view = view.replace(old, new)
    return view


RUN_SUMMARY_V2 = _extended(
    RUN_SUMMARY_V1,
    {
        "AS ops_deferred\n": "AS ops_deferred,\n"
        "           count(*) FILTER (WHERE status = 'planned')  AS ops_planned\n",
        "AS tool_calls\n": "AS tool_calls,\n"
        "       coalesce(o.ops_planned, 0)               AS ops_planned,\n"
        "       r.dry_run\n",
    },
)


# Version 2 of repair_stats (migration "repair_stats_without_first_tool"): a grammar run's
# first-tool side request (attempts.kind 'first_tool', attempt -1) is an attempt row of its
# own, but not a try at the turn's answer: V1 would count its parsed tool name as a valid
# answer (a turn whose every try failed read as repaired) and a turn whose only row is the
# side request (the provider failed after it) as a turn.
REPAIR_STATS_V2 = _extended(
    REPAIR_STATS_V1,
    {
        "FROM attempts GROUP BY run_id, turn": "FROM attempts WHERE kind <> 'first_tool'\n"
        "    GROUP BY run_id, turn"
    },
)
