"""Issue #16, the provider holes: keys stay home, replies are checked, calls end, no tracebacks.

Items 7, 8, 10, 12 and 16, against a real HTTP server on 127.0.0.1 that
behaves as the issue describes (it records what it received, echoes a key
masked, dribbles a byte at a time, answers 200 with garbage). Runs go through
``prepare_run``/``run_librarian`` (the CLI's ``--no-prefect`` path) or the CLI
itself, and the store is read back.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from hostile.tally import Tally
from toolwire.errors import ProviderError
from toolwire.providers.keys import key_for
from toolwire.providers.openai_compat import OpenAIProvider
from toolwire.spec.model import ModelConfig
from toolwire.spec.settings import Settings

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 16: providers"
KEY = f"sk-abcd1234{secrets.token_hex(12)}wxyz"


def _ok(text: str = "hello") -> dict[str, Any]:
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip


class _Server:
    """A chat endpoint whose answer is ``mode``; remembers every Authorization header."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.auth: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.auth.append(self.headers.get("Authorization", ""))
                owner.answer(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        bodies: dict[str, tuple[int, bytes]] = {
            "ok": (200, json.dumps(_ok()).encode()),
            "masked-401": (401, json.dumps({"error": {
                "message": f"Incorrect API key provided: {KEY[:8]}*****{KEY[-4:]}. "
                           "You can find your API key at https://example.invalid"}}).encode()),
            "not-json": (200, b"<html><body>Welcome to nginx!</body></html>"),
            "truncated": (200, json.dumps(_ok()).encode()[:40]),
            "content-5": (200, json.dumps(_ok() | {"choices": [{"index": 0, "message": {
                "role": "assistant", "content": 5}, "finish_reason": "stop"}]}).encode()),
            "deep": (200, b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
            "bad-request": (400, b'{"error": {"message": "bad model name"}}'),
        }  # fmt: skip
        if self.mode == "dribble":  # one byte every 0.5 s, forever
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            try:
                for _ in range(600):
                    h.wfile.write(b" ")
                    h.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                pass
            return
        status, body = bodies[self.mode]
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    running = _Server()
    try:
        yield running
    finally:
        running.stop()


def _settings(**values: Any) -> Settings:
    return Settings.model_construct(**({"openai_api_key": None, "openai_base_url": None} | values))


def _provider(server: _Server, settings: Settings, **cfg: Any) -> OpenAIProvider:
    model = ModelConfig(name="openai:m", server="llamacpp", base_url=server.base_url, **cfg)
    return OpenAIProvider.from_config(model, settings=settings)


def _ask() -> Any:
    from toolwire.domain import CompletionRequest

    return CompletionRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8)


# ---------------------------------------------------------------- item 7


@pytest.mark.timeout(60)
def test_item7_a_spec_base_url_never_receives_the_key(server: _Server, tally: Tally) -> None:
    configured = _settings(openai_api_key=SecretStr(KEY))  # bound to api.openai.com
    _provider(server, configured).complete(_ask())
    assert server.auth == ["Bearer sk-no-key"]
    elsewhere = _settings(openai_api_key=SecretStr(KEY), openai_base_url="http://other:1/v1")
    _provider(server, elsewhere).complete(_ask())
    assert KEY not in "".join(server.auth)
    bound = _settings(openai_api_key=SecretStr(KEY), openai_base_url=server.base_url)
    _provider(server, bound).complete(_ask())  # the control: configured here, sent here
    assert server.auth[-1] == f"Bearer {KEY}"
    # Plain http to a host that is not this machine: withheld even when configured there.
    lan = "http://10.1.2.3:8000/v1"
    assert key_for(lan, _settings(openai_api_key=SecretStr(KEY), openai_base_url=lan))[0] is None
    https = "https://gpu.example:8443/v1"
    assert key_for(https, _settings(openai_api_key=SecretStr(KEY), openai_base_url=https))[0]
    tally.add(AREA, "inputs tried", 4)
    tally.add(AREA, "keys withheld", 3)


# ---------------------------------------------------------------- item 8


def _spec(tmp: Path, base_url: str, timeout_s: float = 30) -> Path:
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: issue16-providers
version: "1"
transport: xml_attrless
model:
  name: openai:m
  server: llamacpp
  base_url: {base_url}
  constrain: none
  timeout_s: {timeout_s}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking]
""",
        encoding="utf-8",
    )
    (tmp / "notes").mkdir(exist_ok=True)
    (tmp / "notes" / "a.md").write_text("# A\n\nA note about databases.\n")
    return spec


def _run(tmp: Path, base_url: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    from toolwire.librarian.job import prepare_run, run_librarian

    for name in ("TOOLWIRE_OPENAI_API_KEY", "OPENAI_API_KEY", "TOOLWIRE_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = _spec(tmp, base_url)
    ctx = prepare_run(spec, workspace=tmp / "notes", db=tmp / "store.duckdb")
    try:
        return ctx, run_librarian(ctx)
    finally:
        ctx.provider.close()


def _fragments() -> list[str]:
    return [KEY, KEY[:8], KEY[-10:], KEY[8:20]]


@pytest.mark.timeout(120)
def test_item8_a_masked_key_in_a_401_reaches_no_message_row_or_report(
    server: _Server, tmp_path: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.mode = "masked-401"
    ctx, result = _run(
        tmp_path, server.base_url, monkeypatch,
        TOOLWIRE_OPENAI_API_KEY=KEY, TOOLWIRE_OPENAI_BASE_URL=server.base_url,
    )  # fmt: skip
    assert server.auth and server.auth[0] == f"Bearer {KEY}"  # it was sent: bound here
    assert result.status == "Failed" and result.error_code == "LLM_PROVIDER_ERROR"
    assert "Incorrect API key provided" in result.error_message
    _, rows = ctx.store.query("SELECT error_message FROM runs WHERE run_id = ?", [result.run_id])
    report = result.report_path.read_text("utf-8") if result.report_path else ""
    haystack = f"{result.error_message}\n{rows}\n{report}"
    leaks = [f for f in _fragments() if f in haystack]
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "secrets found", len(leaks))
    assert leaks == []
    assert f"{KEY[:8]}*****{KEY[-4:]}" not in haystack


# ---------------------------------------------------------------- item 10


@pytest.mark.timeout(60)
def test_item10_a_server_dribbling_bytes_meets_the_total_deadline(
    server: _Server, tally: Tally
) -> None:
    server.mode = "dribble"
    provider = _provider(server, _settings(), timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        provider.complete(_ask())
    took = time.monotonic() - started
    provider.close()
    assert caught.value.code == "LLM_PROVIDER_TIMEOUT" and caught.value.transient
    assert took < 6, took  # the per-read timeout alone never fired: a byte every 0.5 s
    server.mode = "ok"
    again = _provider(server, _settings(), timeout_s=2.0)
    assert again.complete(_ask()).text == "hello"  # the next call starts fresh
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "faults injected")
    tally.note(AREA, f"item 10: dribbling server cut after {took:.1f} s (timeout_s 2)")


# ---------------------------------------------------------------- item 12


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["not-json", "truncated", "content-5", "deep"])
def test_item12_a_reply_that_is_not_a_completion_fails_the_run_with_a_code(
    mode: str, server: _Server, tmp_path: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.mode = mode
    with pytest.raises(ProviderError) as caught:
        _provider(server, _settings()).complete(_ask())
    assert caught.value.code == "LLM_PROVIDER_INVALID_RESPONSE", caught.value
    ctx, result = _run(tmp_path, server.base_url, monkeypatch)
    assert result.status == "Failed" and result.error_code == "LLM_PROVIDER_INVALID_RESPONSE"
    _, rows = ctx.store.query("SELECT status, error_code FROM runs")
    assert rows == [("Failed", "LLM_PROVIDER_INVALID_RESPONSE")]  # never left 'running'
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "rejected with a code")


# ---------------------------------------------------------------- item 16


@pytest.mark.timeout(400)
def test_item16_provider_4xx_and_missing_replay_print_no_traceback_under_prefect(
    server: _Server, tmp_path: Path, tally: Tally
) -> None:
    server.mode = "bad-request"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    spec = _spec(tmp_path, server.base_url)
    missing = tmp_path / "missing.jsonl"
    for extra in ([], ["--model", f"replay:{missing}"]):
        out = subprocess.run(
            [sys.executable, "-m", "toolwire", "run", str(spec), "--workspace",
             str(tmp_path / "notes"), "--db", str(tmp_path / "store.duckdb"), "--prefect",
             *extra],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        printed = out.stdout + out.stderr
        assert out.returncode in (1, 2), printed
        assert "Traceback" not in printed, printed
        assert "error: " in out.stderr
        tally.add(AREA, "inputs tried")
        tally.add(AREA, "rejected with a code")
