"""The local model in its worker process: a crash inside llama.cpp fails the call with
its own code, never the process that holds the run; the next call starts afresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from toolwire.domain import CompletionRequest
from toolwire.errors import LLM_PROVIDER_CRASHED, ProviderError
from toolwire.providers.llama_worker import CRASH_ON
from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
HELLO = CompletionRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=4)


def test_a_segfault_in_llama_cpp_fails_the_call_and_the_next_call_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CRASH_ON, "chat")  # read by the worker when it starts
    provider = LlamaCppProvider(
        resolve_model_path("smollm2-135m", REPO), name="llamacpp:t", n_ctx=640
    )
    before = provider.tokenize("hello world")  # the worker answers other requests
    with pytest.raises(ProviderError) as info:
        provider.complete(HELLO)
    assert info.value.code == LLM_PROVIDER_CRASHED and info.value.transient is False
    assert "SIGSEGV" in info.value.message and "generating an answer" in info.value.message
    monkeypatch.delenv(CRASH_ON)
    assert provider.tokenize("hello world") == before  # a fresh worker, same model
    assert provider.complete(HELLO).text
    provider.close()


def test_a_run_whose_model_crashes_ends_failed_with_the_workspace_untouched(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "alpha.md").write_text("# Alpha\n\nFirst note.\n", "utf-8")
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    db = tmp_path / "store.duckdb"
    env = {**os.environ, CRASH_ON: "chat", "COLUMNS": "200"}
    toolwire = [sys.executable, "-m", "toolwire"]
    cmd = [
        *toolwire,
        "run",
        str(REPO / "specs" / "agent-xct.yaml"),
        "--workspace",
        str(workspace),
        "--db",
        str(db),
        "--model",
        "llamacpp:smollm2-135m",
        "--no-prefect",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # Failed, not killed by a signal
    assert LLM_PROVIDER_CRASHED in out and "Traceback" not in out, out
    after = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    assert after == before
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("select status, error_code from runs").fetchall()
    assert rows == [("Failed", LLM_PROVIDER_CRASHED)]


def test_a_worker_that_dies_while_loading_is_a_provider_error_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CRASH_ON, "load")
    with pytest.raises(ProviderError) as info:
        LlamaCppProvider(resolve_model_path("smollm2-135m", REPO), name="llamacpp:t", n_ctx=512)
    assert info.value.code == LLM_PROVIDER_CRASHED and "loading" in info.value.message
    monkeypatch.delenv(CRASH_ON)
    provider = LlamaCppProvider(
        resolve_model_path("smollm2-135m", REPO), name="llamacpp:t", n_ctx=512
    )
    assert provider.tokenize("hello")  # the dead worker was forgotten: a fresh one loads
    provider.close()
