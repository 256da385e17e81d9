"""The librarian with the bundled SmolLM2-135M and its grammar: valid first time.

The shipped spec decides with the scorer (``judgement.decide: scorer``: no model call);
``decide: model`` is the path where the model answers every note, tested here.
"""

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


def _model_deciding_spec(repo: Path, folder: Path) -> Path:
    """The shipped spec, with the model answering every note instead of the scorer."""
    text = (repo / "specs" / "librarian.yaml").read_text("utf-8")
    assert "decide: scorer" in text and "prompt_pack: librarian-small" in text  # by name
    text = text.replace("decide: scorer", "decide: model")
    text = text.replace("workspace: ../data/notes", "workspace: notes")
    spec = folder / "librarian-model.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def test_the_model_path_with_the_local_model_parses_and_validates_without_repairs(
    tmp_path: Path, repo: Path
) -> None:
    ws = tmp_path / "notes"
    for rel in NOTES:
        source = repo / "data" / "notes" / rel
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, ws / rel)
    spec = _model_deciding_spec(repo, tmp_path)
    ctx = prepare_run(spec, workspace=ws, db=tmp_path / "s.duckdb")
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    assert result.status == "ok", result.error_message
    assert result.turns == len(NOTES)
    # Seed 002 + grammar: every attempt parses, no repair is ever needed.
    assert [a.parse_ok for a in result.attempts] == [True] * len(NOTES)
    assert all(a.kind == "initial" for a in result.attempts)
    # The grammar admits only operations the spec's validation accepts (what the model
    # proposes may still be dropped by "never worse": these notes already have topics).
    assert all(o.status != "rejected" for o in result.outcomes), [
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


def test_a_recorded_local_run_replays_to_the_same_operations_and_rows(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-KNOWN-FAKE-KEY-0123456789")
    spec = repo / "specs" / "librarian.yaml"

    def fresh_workspace(name: str) -> Path:
        ws = tmp_path / name
        (ws / "home").mkdir(parents=True)
        shutil.copy2(repo / "data/notes/home/cooking/weeknight-dal.md", ws / "home")
        return ws

    def rows(ctx, run_id: str) -> list[tuple]:  # noqa: ANN001
        _, ops = ctx.store.query(
            "select turn, seq, kind, target, status, code, after_sha256 from operations "
            "where run_id = ? order by turn, seq",
            [run_id],
        )
        _, attempts = ctx.store.query(
            "select turn, attempt, kind, raw_text, parse_ok, error_code, finish_reason "
            "from attempts where run_id = ? order by turn, attempt",
            [run_id],
        )
        return ops + attempts

    script = tmp_path / "recorded.jsonl"
    live = prepare_run(
        spec, workspace=fresh_workspace("live"), db=tmp_path / "a.duckdb", record=script
    )
    try:
        first = run_librarian(live)
    finally:
        live.provider.close()
    assert first.status == "ok"
    assert "KNOWN-FAKE-KEY" not in script.read_text(encoding="utf-8")

    again = prepare_run(
        spec,
        workspace=fresh_workspace("replayed"),
        db=tmp_path / "b.duckdb",
        model=f"replay:{script}",
    )
    second = run_librarian(again)
    assert second.status == "ok"
    # Same operations and rows; run ids (and request ids inside raw texts) differ.
    assert rows(again, second.run_id) == [
        tuple(
            str(v).replace(first.run_id[:8], second.run_id[:8]) if isinstance(v, str) else v
            for v in row
        )
        for row in rows(live, first.run_id)
    ]
