"""Issue 20 item 3: a profile step the model cannot do is skipped with one notice,
configurable in the spec, and never eats a replay script's job lines.

- ``memory.synthesis: auto`` (the default) asks the provider first: a replay script
  without lines marked ``"for": "memory"`` and the bundled 135M model turn the
  request down, the run says so once, and the interaction still counts;
- ``off`` is silent; ``on`` asks anyway (and a replay script answers it only from
  its memory lines);
- through the real CLI: an agent spec replayed from its cassette ends without
  ``REPLAY_EXHAUSTED`` or ``insights dropped``, with one notice line.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.domain import CompletionRequest, Operation, OperationOutcome
from toolwire.memory.profiles import latest_profile
from toolwire.memory.synthesis import after_run, skip_reason
from toolwire.providers.replay import ReplayProvider
from toolwire.store import Store

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
SKIPPED = "profile synthesis skipped"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A store holding one finished librarian run of user ann (run-1)."""
    store = Store(tmp_path / "store.duckdb")
    store.start_run({"run_id": "run-1", "user_id": "ann", "spec_name": "t", "job": "librarian"})
    op = Operation("op_1", "retag_note", "knife", None, "Knife", "cooking", "because", 0.9)
    store.finish_run(
        "run-1",
        status="ok",
        error_code=None,
        error_message=None,
        turns=1,
        operations=[OperationOutcome(turn=0, seq=0, operation=op, status="applied")],
        tool_calls=[],
        report_markdown=None,
    )
    return store


def _script(path: Path, *lines: dict[str, str]) -> ReplayProvider:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return ReplayProvider(path)


def test_auto_skips_a_script_without_memory_lines_once_and_keeps_its_job_lines(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _script(tmp_path / "s.jsonl", {"text": "the next run's answer"})
    with caplog.at_level(logging.DEBUG, logger="toolwire.memory"):
        after_run(store, provider, "ann", "run-1")
    assert provider.remaining_for("job") == 1  # not eaten
    skips = [r for r in caplog.records if SKIPPED in r.getMessage()]
    assert len(skips) == 1 and skips[0].levelno == logging.WARNING
    assert '"for": "memory"' in skips[0].getMessage()
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.interactions == 1  # the interaction still counts


def test_auto_asks_when_the_script_has_a_memory_line(store: Store, tmp_path: Path) -> None:
    provider = _script(
        tmp_path / "s.jsonl",
        {"text": "the next run's answer"},
        {"text": '{"interests": ["knives"]}', "for": "memory"},
    )
    after_run(store, provider, "ann", "run-1")
    assert (provider.remaining_for("job"), provider.remaining_for("memory")) == (1, 0)
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.profile.interests == ["knives"]


def test_off_is_silent_and_on_asks_but_still_never_takes_a_job_line(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _script(tmp_path / "s.jsonl", {"text": "the next run's answer"})
    with caplog.at_level(logging.INFO, logger="toolwire.memory"):
        after_run(store, provider, "ann", "run-1", "off")
    assert caplog.text == ""
    with caplog.at_level(logging.INFO, logger="toolwire.memory"):
        after_run(store, provider, "ann", "run-1", "on")
    assert "insights dropped: model call failed" in caplog.text  # asked: none to give
    assert SKIPPED not in caplog.text
    assert provider.remaining_for("job") == 1
    _, rows = store.query("SELECT interactions FROM profiles ORDER BY version")
    assert rows == [(1,), (2,)]


def test_the_bundled_model_turns_the_profile_step_down_and_nothing_else(tmp_path: Path) -> None:
    from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path

    gguf = resolve_model_path("smollm2-135m", tmp_path)
    provider = LlamaCppProvider(gguf, name="llamacpp:smollm2-135m", n_ctx=512)
    try:
        why = skip_reason(provider, "auto")
        assert why is not None and "135M parameters" in why and "memory.synthesis" in why
        assert skip_reason(provider, "on") is None
        job_request = CompletionRequest(messages=[{"role": "user", "content": "x"}])
        assert provider.refusal(job_request) is None
    finally:
        provider.close()


def _toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        cwd=REPO,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_replayed_agent_run_ends_with_one_notice_not_a_failed_step(tmp_path: Path) -> None:
    ws = Path(shutil.copytree(REPO / "tests" / "data" / "tools" / "scratch", tmp_path / "ws"))
    db = tmp_path / "store.duckdb"
    spec = REPO / "specs" / "agent-xct.yaml"
    ran = _toolwire("run", spec, "--workspace", ws, "--db", db, "--user", "ann", "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.count(SKIPPED) == 1, ran.stderr
    for noise in ("REPLAY_EXHAUSTED", "insights dropped", "Traceback"):
        assert noise not in ran.stderr + ran.stdout
    _, rows = Store(db).query("SELECT interactions FROM profiles WHERE user_id = 'ann'")
    assert rows == [(1,)]


def test_the_quickstart_spec_has_the_profile_step_off(tmp_path: Path) -> None:
    from toolwire.spec.model import load_spec

    assert load_spec(REPO / "specs" / "librarian.yaml").spec.memory.synthesis == "off"
    assert load_spec(REPO / "specs" / "agent-xct.yaml").spec.memory.synthesis == "auto"
