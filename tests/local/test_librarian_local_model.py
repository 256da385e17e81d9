"""The shipped librarian spec with the bundled SmolLM2-135M and its grammar: valid first time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from toolwire.librarian.job import prepare_run, run_librarian

pytestmark = pytest.mark.local

NOTES = [
    "home/cooking/sourdough-starter.md",
    "home/finance/monthly-budget.md",
    "tech/databases/duckdb-for-analytics.md",
]


def test_shipped_spec_with_the_local_model_parses_and_validates_without_repairs(
    tmp_path: Path, repo: Path
) -> None:
    ws = tmp_path / "notes"
    for rel in NOTES:
        source = repo / "data" / "notes" / rel
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, ws / rel)
    ctx = prepare_run(repo / "specs" / "librarian.yaml", workspace=ws, db=tmp_path / "s.duckdb")
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    assert result.status == "ok", result.error_message
    assert result.turns == len(NOTES)
    # Seed 002 + grammar: every attempt parses, no repair is ever needed.
    assert [a.parse_ok for a in result.attempts] == [True] * len(NOTES)
    assert all(a.kind == "initial" for a in result.attempts)
    # The grammar admits only operations the spec's validation accepts.
    assert result.outcomes and all(o.status == "applied" for o in result.outcomes), [
        (o.code, o.detail) for o in result.outcomes
    ]
    _, rows = ctx.store.query(
        "select count(*), sum(case when raw_text <> '' then 1 else 0 end) from attempts "
        "where run_id = ?",
        [result.run_id],
    )
    assert rows == [(len(NOTES), len(NOTES))]
    _, hashes = ctx.store.query(
        "select length(spec_hash), length(pack_hash) from runs where run_id = ?", [result.run_id]
    )
    assert hashes == [(64, 64)]
