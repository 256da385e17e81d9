"""Great Expectations checks over a real store: a clean store passes, each break is named.

Each case breaks a copy of one small store (librarian runs with and without a
repair, plus a tool-agent run with tool calls) with one SQL statement and
expects exactly the named expectations to fail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_batch import AGENT_SPEC, SCRATCH, _corrupt, librarian_inputs

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]

# (case id, SQL that breaks the store, the expectations that must fail: no more, no fewer)
CASES: list[tuple[str, str, set[str]]] = [
    (
        "spec_hash_uppercase",
        "UPDATE runs SET spec_hash = upper(spec_hash) WHERE job = 'agent'",
        {"runs.spec_hash_is_64_hex", "runs.spec_stored"},
    ),
    (
        "spec_hash_missing",
        "UPDATE runs SET spec_hash = NULL WHERE job = 'agent'",
        {"runs.spec_hash_present", "runs.spec_stored"},
    ),
    ("spec_yaml_gone", "DELETE FROM specs", {"runs.spec_stored"}),
    ("pack_hash_missing", "UPDATE runs SET pack_hash = NULL", {"runs.pack_hash_present"}),
    (
        "pack_hash_short",
        "UPDATE runs SET pack_hash = left(pack_hash, 12)",
        {"runs.pack_hash_is_64_hex"},
    ),
    ("run_status_unknown", "UPDATE runs SET status = 'done'", {"runs.status_in_enum"}),
    (
        "transport_unknown",
        "UPDATE runs SET transport = 'carrier-pigeon' WHERE job = 'agent'",
        {"runs.transport_in_enum"},
    ),
    (
        "attempt_without_run",
        "INSERT INTO attempts (run_id, turn, attempt, kind, raw_text, parse_ok) "
        "VALUES ('ghost', 0, 0, 'initial', 'x', true)",
        {"attempts.run_exists"},
    ),
    (
        "attempt_kind_unknown",
        "UPDATE attempts SET kind = 'retry' WHERE attempt = 1",
        {"attempts.kind_in_enum"},
    ),
    (
        "first_tool_misnumbered",  # a side request numbered as a try would take its key
        "UPDATE attempts SET kind = 'first_tool' WHERE attempt = 1",
        {"attempts.number_fits_kind"},
    ),
    (
        "attempts_over_repair_budget",
        "INSERT INTO attempts (run_id, turn, attempt, kind, raw_text, parse_ok) "
        "SELECT run_id, turn, attempt + n, 'repair', 'again', false "
        "FROM attempts, range(1, 3) AS r(n) "  # attempts 2 and 3: four in all, three allowed
        "WHERE attempt = 1 AND run_id IN (SELECT run_id FROM runs WHERE job = 'librarian')",
        {"attempts.per_turn_within_repair_budget"},
    ),
    (
        "raw_text_missing",
        "ALTER TABLE attempts ALTER COLUMN raw_text DROP NOT NULL; "
        "UPDATE attempts SET raw_text = NULL WHERE attempt = 0",
        {"attempts.raw_text_present"},
    ),
    (
        "confidence_above_one",
        "UPDATE operations SET confidence = 1.5",
        {"operations.confidence_in_0_1"},
    ),
    (
        "confidence_negative",
        "UPDATE operations SET confidence = -0.1 WHERE seq = 0",
        {"operations.confidence_in_0_1"},
    ),
    (
        "operation_status_unknown",
        "UPDATE operations SET status = 'maybe'",
        {"operations.status_in_enum"},
    ),
    (
        "operation_kind_unknown",
        "UPDATE operations SET kind = 'delete_note'",
        {"operations.kind_in_enum"},
    ),
    (
        "operation_without_run",
        "UPDATE operations SET run_id = 'ghost' "
        "WHERE seq = 0 AND run_id = (SELECT min(run_id) FROM operations)",
        {"operations.run_exists"},
    ),
    (
        "run_deleted_leaves_orphans",
        "DELETE FROM runs WHERE job = 'agent'",
        {"attempts.run_exists", "tool_calls.run_exists"},
    ),
    (
        "tool_status_unknown",
        "UPDATE tool_calls SET status = 'exploded' WHERE seq = 1",
        {"tool_calls.status_in_enum"},
    ),
]


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two librarian runs (one repaired) and one agent run with tool calls."""
    from toolwire.flows.batch import BatchItem, BatchShared, execute_item, plan_batch

    tmp = tmp_path_factory.mktemp("quality")
    db = tmp / "clean.duckdb"
    spec, (ws,), good, repair = librarian_inputs(tmp, 1)
    shared = BatchShared(str(spec), str(db), "q", dry_run=True)
    outcomes = [execute_item(item, shared) for item in plan_batch([ws], [good, repair])]
    scratch = tmp / "scratch"
    shutil.copytree(SCRATCH, scratch)
    model = f"replay:{REPO / 'tests' / 'data' / 'replay' / 'agent-native.jsonl'}"
    agent = BatchItem(0, str(scratch), model, "native")
    outcomes.append(execute_item(agent, BatchShared(str(AGENT_SPEC), str(db), "q")))
    assert [o["status"] for o in outcomes] == ["ok", "ok", "ok"], outcomes
    return db


def test_a_clean_store_passes_every_check(clean_store: Path) -> None:
    from toolwire.store import Store
    from toolwire.store.quality import CHECKS, check_store

    report = check_store(Store(clean_store))
    assert [r.name for r in report.results] == [c.name for c in CHECKS]
    assert report.ok, [r.summary() for r in report.failures]
    rows = {r.table: r.checked_rows for r in report.results}
    # Every frame had rows to check (a check over nothing proves nothing).
    assert rows["runs"] == 3 and rows["operations"] >= 2 and rows["tool_calls"] >= 3


@pytest.mark.parametrize(("sql", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_break_fails_exactly_its_named_expectations(
    clean_store: Path, tmp_path: Path, sql: str, expected: set[str]
) -> None:
    from toolwire.store import Store
    from toolwire.store.quality import check_store

    broken = tmp_path / "broken.duckdb"
    shutil.copy(clean_store, broken)
    _corrupt(broken, sql)
    report = check_store(Store(broken))
    assert not report.ok
    assert {r.name for r in report.failures} == expected
    for failure in report.failures:
        assert failure.unexpected_count > 0 and failure.error is None
        assert failure.sample, failure.name  # the offending rows are named
        assert failure.summary().startswith(f"FAIL  {failure.name}: ")


def test_outcomes_are_recorded_with_their_samples(clean_store: Path, tmp_path: Path) -> None:
    from toolwire.store import Store
    from toolwire.store.quality import CHECKS, check_store, record_quality

    broken = tmp_path / "broken.duckdb"
    shutil.copy(clean_store, broken)
    _corrupt(
        broken,
        "UPDATE operations SET confidence = 2.0 "
        "WHERE seq = 0 AND run_id = (SELECT min(run_id) FROM operations)",
    )
    store = Store(broken)
    report = check_store(store)
    record_quality(store, report, batch_id="b-q")
    _, rows = store.query(
        "SELECT expectation, unexpected_count, sample_json FROM quality_checks "
        "WHERE check_id = ? AND batch_id = 'b-q' AND NOT success",
        [report.check_id],
    )
    assert [r[:2] for r in rows] == [("operations.confidence_in_0_1", 1)]
    sample = json.loads(rows[0][2])
    assert sample[0]["confidence"] == 2.0 and sample[0]["seq"] == 0 and sample[0]["run_id"]
    _, total = store.query("SELECT count(*) FROM quality_checks")
    assert total == [(len(CHECKS),)]
