"""Issue 45 item 19: no form of the key a server echoes gets out of a run.

Round three's redaction missed two echoes: base64 of ``Bearer <key>`` (the header a
server got, echoed in a 401 body) reached the terminal, the report and the store; a
server that echoes the key inside a completion put its first 12 characters in the
store and the ``--record`` cassette. A real HTTP server on 127.0.0.1 (the key is bound
to it, so it is sent) answers each way below to ``toolwire run --record`` in a child
process; everything the run left is searched for the key, its parts and the encoded
echo itself.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hostile.tally import Tally
from hostile.test_issue30_09_key_echoes import KEY, _fragments, _readings, _spec, _store_text

AREA = "issue 45 #19: encoded key echoes"
BEARER = f"Bearer {KEY}".encode()
# name: (status, what the server says)
ECHOES = {
    "401, base64 of the header": (401, "bad credentials " + base64.b64encode(BEARER).decode()),
    "401, url-safe base64, no padding": (
        401,
        "token=" + base64.urlsafe_b64encode(b"Authorization: " + BEARER).decode().rstrip("="),
    ),
    "401, base64 of a JSON holding it": (
        401,
        "ctx " + base64.b64encode(json.dumps({"auth": BEARER.decode()}).encode()).decode(),
    ),
    "200, the key in the completion": (200, f"Sure. Your key {KEY[:12]} is fine, and {KEY}."),
    "200, base64 in the completion": (200, "Debug: " + base64.b64encode(BEARER).decode()),
}


class _Server:
    def __init__(self) -> None:
        self.status, self.echo = 401, ""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if owner.status == 200:
                    body = {
                        "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": owner.echo}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }  # fmt: skip
                else:
                    body = {"error": {"message": owner.echo, "type": "invalid_key"}}
                raw = json.dumps(body).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    running = _Server()
    try:
        yield running
    finally:
        running.httpd.shutdown()
        running.httpd.server_close()


@pytest.mark.parametrize("variant", list(ECHOES))
def test_no_encoded_or_quoted_key_reaches_terminal_report_store_or_cassette(
    server: _Server, tmp_path: Path, tally: Tally, variant: str
) -> None:
    server.status, server.echo = ECHOES[variant]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWIRE_", "OPENAI_"))}
    env.update(TOOLWIRE_OPENAI_API_KEY=KEY, TOOLWIRE_OPENAI_BASE_URL=server.base_url)
    db, cassette = tmp_path / "data" / "s.duckdb", tmp_path / "cassette.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "run", str(_spec(tmp_path, server.base_url)),
         "--workspace", str(tmp_path / "notes"), "--db", str(db), "--no-prefect",
         "--record", str(cassette)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    places = {
        "terminal": done.stdout + done.stderr,
        "report": "".join(p.read_text("utf-8") for p in (db.parent / "reports").glob("*.md")),
        "store": _store_text(db),
        "cassette": cassette.read_text("utf-8") if cassette.exists() else "",
    }
    encoded = [w for w in server.echo.split() if len(w) > 20 and KEY not in w]
    leaks = {
        where: [f for f in _fragments() if f in _readings(text)]
        + [w[:16] for w in encoded if w[:16] in text]
        for where, text in places.items()
    }
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "secrets found", sum(map(len, leaks.values())))
    assert not any(leaks.values()), (variant, leaks, places["terminal"][-800:])
    if server.status == 200:  # the answer itself was kept, redacted
        assert "***" in places["store"]
