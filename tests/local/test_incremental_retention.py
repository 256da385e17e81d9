"""Retention of raw texts (issue 29): prompts and raw replies are kept for every failed
run and the last ``TOOLWIRE_KEEP_RAW_RUNS`` ok runs; older ok runs keep their rows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolwire.domain import Attempt
from toolwire.store import Store
from toolwire.store.store import PRUNED

pytestmark = pytest.mark.local


def _run(store: Store, run_id: str, status: str, started: float) -> None:
    store.start_run({"run_id": run_id, "job": "librarian", "started_at": started})
    store.record_attempt(
        run_id,
        Attempt(
            turn=0,
            attempt=0,
            kind="initial",
            request_id=f"req_{run_id}",
            prompt=[{"role": "user", "content": f"prompt of {run_id}"}],
            raw_text=f"reply of {run_id}",
            parse_ok=status == "ok",
            error_code=None,
            error_codes=(),
            input_tokens=1,
            output_tokens=1,
            latency_ms=1.0,
            finish_reason="stop",
            started_at=started,
        ),
    )
    store.finish_run(
        run_id,
        status=status,
        error_code=None if status == "ok" else "X",
        error_message=None,
        turns=1,
        operations=[],
        tool_calls=[{"turn": 0, "seq": 0, "args_json": "{}", "result_text": f"out {run_id}"}],
        report_markdown=f"report of {run_id}",
    )


def test_old_ok_runs_lose_their_raw_texts_failed_and_recent_ones_keep_them(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s.duckdb")
    now = time.time()
    for i, status in enumerate(["ok", "Failed", "ok", "ok", "ok"]):
        _run(store, f"r{i}", status, now - 100 + i)
    assert store.prune_raw_texts(2) == 2  # r0 and r2; r1 failed, r3 and r4 are the last 2
    _, rows = store.query(
        "SELECT a.run_id, a.raw_text, a.prompt_json IS NULL, t.result_text, r.markdown "
        "FROM attempts a JOIN tool_calls t USING (run_id) JOIN reports r USING (run_id) "
        "ORDER BY a.run_id"
    )
    got = {r[0]: r[1:] for r in rows}
    for old in ("r0", "r2"):
        assert got[old][:3] == (PRUNED, True, None)
        assert got[old][3] == f"report of {old}"  # the run's report and rows stay
    for kept in ("r1", "r3", "r4"):
        assert got[kept][:3] == (f"reply of {kept}", False, f"out {kept}")
    assert store.prune_raw_texts(2) == 0  # nothing left to prune: a run prunes only the new
