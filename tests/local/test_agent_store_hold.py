"""An agent run opens the store file once (issue 31): held from prepare to finish.

Before, every write of an agent run (spec, pack, run row, each attempt, the final
rows) opened and closed the DuckDB file on its own: 11-15 opens for a replayed run
of the shipped specs. Now ``prepare_agent_run`` takes the run's hold on the file
(``runstart.open_run``) and ``run_agent`` ends it, as the librarian does; a model
call that is not a replay lets go of the file meanwhile, so ``toolwire sql`` from
another process need not wait for the whole run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from store_probe import other_process_reads

from toolwire.agent import AGENT_TRANSPORTS, AgentContext, prepare_agent_run, run_agent
from toolwire.domain import Completion, CompletionRequest
from toolwire.providers.replay import ReplayProvider
from toolwire.store import Store

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


def _prepare(tmp_path: Path, transport: str, model: str | None = None) -> AgentContext:
    script = DATA / "replay" / f"agent-{transport}.jsonl"
    return prepare_agent_run(
        REPO / "specs" / f"agent-{transport}.yaml",
        workspace=shutil.copytree(DATA / "tools" / "scratch", tmp_path / f"ws-{transport}"),
        db=tmp_path / "store.duckdb",
        model=model or f"replay:{script}",
    )


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_a_replayed_agent_run_opens_the_store_once(tmp_path: Path, transport: str) -> None:
    db = tmp_path / "store.duckdb"
    before = Store(db).opens  # this process's count for the file
    ctx = _prepare(tmp_path, transport)
    try:
        result = run_agent(ctx)
    finally:
        ctx.provider.close()
    assert result.status == "ok", result.error_message
    assert len(result.attempts) >= 4  # a multi-turn run: every attempt written in the hold
    assert Store(db).opens - before == 1
    assert ctx.store_session is None  # the run let go of the file when it ended
    assert Store(db).get_run(result.run_id)["status"] == "ok"


@pytest.mark.parametrize("provider", ["openai", "replay"])
def test_the_store_is_free_while_the_agent_model_thinks_and_held_through_a_replay(
    tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process reads the store during a model call (not a replay), and not
    during a replayed one; after the run it can in both."""
    monkeypatch.setenv("TOOLWIRE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    db = tmp_path / "store.duckdb"
    before = Store(db).opens
    ctx = _prepare(tmp_path, "xct", "openai:never-called" if provider == "openai" else None)
    replay = ReplayProvider(DATA / "replay" / "agent-xct.jsonl")  # the answers either way
    seen: list[subprocess.CompletedProcess[str]] = []

    def thinking(request: CompletionRequest) -> Completion:
        if not seen:  # one look is enough (each costs a process start)
            seen.append(other_process_reads(db))
        return replay.complete(request)

    try:
        result = run_agent(ctx, call=thinking)
    finally:
        ctx.provider.close()
    assert result.status == "ok", result.error_message
    (during,) = seen
    calls = len(result.attempts)
    if provider == "openai":
        assert during.returncode == 0, during.stderr
        # One open for the run, one more each time a model call gave the file back.
        assert Store(db).opens - before == 1 + calls
    else:
        assert during.returncode != 0 and "STORE_LOCKED" in during.stdout + during.stderr
        assert Store(db).opens - before == 1
    after = other_process_reads(db)
    assert after.returncode == 0, after.stderr
