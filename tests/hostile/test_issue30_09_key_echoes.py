"""Issue #30 item 9: no echo of the API key, masked, partial or encoded, gets out of a run.

Last round's fix redacted the key and echoes masked with ``**``/``...``
keeping its first 8 and last 4 characters. The new round found two more
variants that still reached the terminal, the markdown report, the store and a
``--record`` cassette. Here a real HTTP server on 127.0.0.1 (the key is bound
to it, so it is sent) answers 401 with the key echoed in each way below, and
``toolwire run --record`` goes through the CLI in a child process. Everything
the run left (its output, the report files, every row of the store, the
cassette) is searched for the key, its first and last 4 characters, any 8 in a
row, and their URL-encoded forms.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import duckdb
import pytest

from hostile.tally import Tally

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 30 #9: key echoes"
# Random, but its own first and last 4 characters hold letters no hex digit is: the test
# looks for them in the store, whose run ids and sha256 hashes are hex, where 4 random hex
# digits turned up by chance (a false "leak" in about one run in ten).
KEY = f"sk-proj-QZ{secrets.token_hex(19)}Wv"
OWN = KEY[len("sk-proj-") :]

ECHOES = {
    "ellipsis": f"Incorrect API key provided: sk-proj-{OWN[:4]}\u2026{KEY[-4:]}.",
    "stars, tail only": f"Incorrect API key provided: sk-****{KEY[-4:]}.",
    "head and tail": f"Invalid key sk-abc...{KEY[-4:]} (starts {OWN[:4]}).",
    "hash mask": f"key {KEY[:12]}#########{KEY[-4:]} is not valid",
    "ends in words": f"The key ending in {KEY[-4:]} was revoked; it began {KEY[:12]}.",
    "tag mask": f"key {KEY[:12]}<redacted>{KEY[-6:]} refused",
    "url-encoded": "see https://keys.invalid/check?k=" + quote(quote(KEY, safe=""), safe=""),
    "percent every byte": "url https://x.invalid/?k=" + "".join(f"%{ord(c):02X}" for c in KEY),
    "fullwidth": "key " + "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in KEY),
    # A 200 whose body is an error object (a proxy's way): quoted by the reply check.
    "200 error object": f"Incorrect API key provided: {KEY[:12]}******{KEY[-4:]}",
}


def _fragments() -> list[str]:
    """The key, its own first 4 and last 4 characters, and 8-character runs of it."""
    return [KEY, OWN[:4], KEY[-4:]] + [KEY[i : i + 8] for i in range(3, len(KEY) - 8, 5)]


def _readings(text: str) -> str:
    """``text`` as written, URL-decoded (once and twice) and NFKC-folded: a leak in any."""
    once = unquote(text)
    return "\n".join((text, once, unquote(once), unicodedata.normalize("NFKC", text)))


class _Server:
    """A chat endpoint answering 401 with ``self.echo`` as the error message."""

    def __init__(self) -> None:
        self.echo = ""
        self.status = 401
        self.auth: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.auth.append(self.headers.get("Authorization", ""))
                body = json.dumps({"error": {"message": owner.echo, "type": "invalid_key"}})
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body.encode())))
                self.end_headers()
                self.wfile.write(body.encode())

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


def _spec(tmp: Path, base_url: str) -> Path:
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: issue30-keys
version: "1"
transport: xml_attrless
model:
  name: openai:m
  server: llamacpp
  base_url: {base_url}
  constrain: none
  timeout_s: 30
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking]
""",
        encoding="utf-8",
    )
    (tmp / "notes").mkdir()
    (tmp / "notes" / "a.md").write_text("# A\n\nA note about databases.\n")
    return spec


def _store_text(db: Path) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("variant", list(ECHOES))
def test_item_9_no_echo_of_the_key_reaches_terminal_report_store_or_cassette(
    server: _Server, tmp_path: Path, tally: Tally, variant: str
) -> None:
    server.echo = ECHOES[variant]
    server.status = 200 if variant.startswith("200") else 401
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWIRE_", "OPENAI_"))}
    env.update(TOOLWIRE_OPENAI_API_KEY=KEY, TOOLWIRE_OPENAI_BASE_URL=server.base_url)
    db, cassette = tmp_path / "data" / "s.duckdb", tmp_path / "cassette.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "run", str(_spec(tmp_path, server.base_url)),
         "--workspace", str(tmp_path / "notes"), "--db", str(db), "--no-prefect",
         "--record", str(cassette)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert server.auth and server.auth[-1] == f"Bearer {KEY}"  # the key was sent: bound here
    assert done.returncode == 1 and "LLM_PROVIDER_" in done.stderr, done.stderr[-2000:]
    places = {
        "terminal": done.stdout + done.stderr,
        "report": "".join(p.read_text("utf-8") for p in (db.parent / "reports").glob("*.md")),
        "store": _store_text(db),
        "cassette": cassette.read_text("utf-8") if cassette.exists() else "",
    }
    told = "401" if server.status == 401 else "error object"  # the failure is told
    assert told in places["terminal"] and told in places["store"], places["terminal"][-800:]
    leaks = {w: [f for f in _fragments() if f in _readings(t)] for w, t in places.items()}
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "secrets found", sum(map(len, leaks.values())))
    assert not any(leaks.values()), (variant, leaks, places["terminal"][-800:])
