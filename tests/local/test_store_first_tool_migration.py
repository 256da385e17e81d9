"""Migration 11 (repair_stats_without_first_tool) on a real file written at version 10.

A grammar run stores its first-tool side request as an attempt row of its own
(kind ``first_tool``, attempt -1). ``repair_stats`` V1 read that row's parsed
tool name as a valid try of the turn (a turn whose every try failed counted as
repaired) and a turn holding only that row as a turn; once the file upgrades,
the view leaves the side request out, and the rows written before are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire.domain import Attempt
from toolwire.store import LATEST_VERSION, Store, schema

pytestmark = pytest.mark.local


def _attempt(turn: int, n: int, kind: str, ok: bool) -> Attempt:
    return Attempt(
        turn=turn,
        attempt=n,
        kind=kind,  # type: ignore[arg-type]
        request_id=f"r-{turn}-{n}",
        prompt=[{"role": "user", "content": "Task: x\nTool:"}],
        raw_text="list_dir" if kind == "first_tool" else "not json",
        parse_ok=ok,
        error_code=None if ok else "XCT_INVALID",
        error_codes=(),
        input_tokens=100,
        output_tokens=3,
        latency_ms=10.0,
        finish_reason="stop",
        started_at=1_700_000_000.0,
    )


def _stats(store: Store) -> dict[str, Any]:
    cols, rows = store.query("select * from repair_stats")
    (row,) = rows
    return dict(zip(cols, row, strict=True))


def test_an_old_file_upgrades_and_repair_stats_leaves_the_side_request_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = list(schema.MIGRATIONS)
    monkeypatch.setattr(schema, "MIGRATIONS", released[:10])  # a file written by toolwire 10
    old = Store(tmp_path / "old.duckdb")
    old.start_run({"run_id": "g", "job": "agent", "transport": "xct", "provider": "llamacpp"})
    # Turn 0: side request parsed, first try and both repairs failed. Turn 1: the provider
    # failed after the side request, so the turn holds that row alone.
    old.record_attempt("g", _attempt(0, -1, "first_tool", True))
    for n in range(3):
        old.record_attempt("g", _attempt(0, n, "initial" if n == 0 else "repair", False))
    old.record_attempt("g", _attempt(1, -1, "first_tool", True))
    assert old.schema_version() == 10
    before = _stats(old)
    assert (before["turns"], before["repaired_turns"]) == (2, 2)  # what V1 got wrong

    monkeypatch.setattr(schema, "MIGRATIONS", released)
    new = Store(old.path)
    assert new.schema_version() == LATEST_VERSION >= 11
    after = _stats(new)
    assert (after["turns"], after["repaired_turns"], after["failed_turns"]) == (1, 0, 1)
    assert (after["repairs"], after["first_try_valid"]) == (2, 0)
    kept = new.query("select kind, attempt from attempts order by turn, attempt")[1]
    assert kept == [
        ("first_tool", -1),
        ("initial", 0),
        ("repair", 1),
        ("repair", 2),
        ("first_tool", -1),
    ]
    # run_summary still counts every row (every model call) and every token.
    summary = new.query("select attempts, input_tokens, repairs from run_summary")[1]
    assert summary == [(5, 500, 2)]
