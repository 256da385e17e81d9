"""Secrets (#8 item 6): an API key never reaches the store, logs, reports or recordings.

A real llama.cpp server on 127.0.0.1 is started with ``--api_key``: it answers
401 to any request without that exact bearer key, so a run that succeeds proves
the key travelled on every call. Then everything the runs left behind is
searched for the key (and for fragments of it, as providers' error messages echo
a key's ends): every file under the run's folder (store, reports, recording,
Parquet export, journal, Prefect's home and its database), every row of every
store table read back through SQL (DuckDB compresses strings on disk, so the
file's bytes alone prove little), and everything the commands printed.

A second run sends a *wrong* key, which the server refuses: the failure is
recorded, and neither key appears in it.

Each search has a positive control (a string that must be found the same way),
so an empty search result cannot come from searching the wrong place.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer, start_llama_server

from hostile.tally import Tally
from toolwire.store import Store

pytestmark = [pytest.mark.local, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
NOTES = ("home/cooking/weeknight-dal.md",)
KEY = f"sk-toolwire-FAKE-{secrets.token_hex(16)}"
WRONG_KEY = f"sk-toolwire-WRONG-{secrets.token_hex(16)}"
AREA = "secrets: fake API key"


def _fragments(key: str) -> list[str]:
    """The key and the ends of it an error message might echo (``sk-...abcd``)."""
    random_part = key.rsplit("-", 1)[1]
    return [key, random_part, random_part[:10], random_part[-10:]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    running = start_llama_server(tmp_path_factory.mktemp("llama_keyed"), api_key=KEY)
    try:
        yield running
    finally:
        running.stop()


def _workspace(root: Path) -> Path:
    for rel in NOTES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "data" / "notes" / rel, root / rel)
    return root


def _toolwire(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=480,
        cwd=REPO,
    )


def _env(root: Path, server: LlamaServer, key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOOLWIRE" not in k}
    env.update(
        OPENAI_API_KEY=key,
        TOOLWIRE_OPENAI_BASE_URL=server.base_url,
        TOOLWIRE_LOG_LEVEL="DEBUG",  # the most a log ever says
        PREFECT_HOME=str(root / "prefect-home"),
        PREFECT_LOGGING_LEVEL="DEBUG",
    )
    return env


def _store_dump(db: Path) -> str:
    """Every row of every table in the store, as text."""
    store = Store(db)
    _, tables = store.query(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    )
    out = []
    for (table,) in tables:
        _, rows = store.query(f'SELECT * FROM "{table}"')
        out.append(json.dumps(rows, default=str, ensure_ascii=False))
    return "\n".join(out)


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _leaks(haystack: bytes, keys: tuple[str, ...]) -> list[str]:
    return [frag for key in keys for frag in _fragments(key) if frag.encode() in haystack]


def _model_deciding_spec(folder: Path) -> Path:
    """The shipped librarian spec with the model answering every note: the shipped one
    decides with the scorer and never calls the model, so no key would be sent."""
    text = (REPO / "specs" / "librarian.yaml").read_text("utf-8")
    assert "decide: scorer" in text and "prompt_pack: librarian-small" in text  # by name
    text = text.replace("decide: scorer", "decide: model")
    spec = folder / "librarian-model.yaml"
    spec.write_text(text.replace("workspace: ../data/notes", "workspace: notes"), "utf-8")
    return spec


def test_a_fake_key_is_used_and_never_written_anywhere(
    server: LlamaServer, tmp_path: Path, tally: Tally
) -> None:
    keys = (KEY, WRONG_KEY)
    db = tmp_path / "store.duckdb"
    spec = _model_deciding_spec(tmp_path)
    common = ("--db", db, "--model", "openai:smollm2")
    printed: list[str] = []

    good = _toolwire(
        _env(tmp_path, server, KEY),
        "run",
        spec,
        "--workspace",
        _workspace(tmp_path / "notes"),
        "--record",
        tmp_path / "recorded.jsonl",
        "--prefect",  # a flow run: the key must not reach Prefect's home either
        *common,
    )
    printed += [good.stdout, good.stderr]
    # The run itself must have started (a Prefect that could not start leaves no row).
    assert "PREFECT_UNAVAILABLE" not in good.stderr, good.stderr[-2000:]
    bad = _toolwire(
        _env(tmp_path, server, WRONG_KEY),
        "run",
        spec,
        "--workspace",
        _workspace(tmp_path / "notes-wrong-key"),
        "--no-prefect",
        *common,
    )
    printed += [bad.stdout, bad.stderr]
    assert bad.returncode != 0
    env = _env(tmp_path, server, KEY)
    for args in (
        ("runs", "--db", db),
        ("report", "--db", db, "--html", tmp_path / "report.html"),
        ("export", "--db", db, "--parquet", tmp_path / "parquet"),
        ("sql", "--db", db, "SELECT * FROM attempts"),
    ):
        done = _toolwire(env, *args)
        assert done.returncode == 0, (args, done.stdout + done.stderr[-2000:])
        printed += [done.stdout, done.stderr]

    store = Store(db)
    _, runs = store.query(
        "SELECT r.error_code, r.error_message, count(a.turn), min(a.output_tokens) "
        "FROM runs r LEFT JOIN attempts a USING (run_id) "
        "GROUP BY r.run_id, r.started_at, r.error_code, r.error_message ORDER BY r.started_at"
    )
    # The right key got through: the model answered (however well); the wrong one did not.
    assert runs[0][0] != "LLM_PROVIDER_ERROR" and runs[0][2] >= 1 and runs[0][3] > 0, runs[0]
    assert runs[1][0] == "LLM_PROVIDER_ERROR" and "401" in (runs[1][1] or ""), runs[1]

    files = _files(tmp_path)
    dump = _store_dump(db)
    output = "\n".join(printed)
    searched = {
        "store rows": dump.encode(),
        "command output": output.encode(),
        **{f"file {name}": data for name, data in files.items()},
    }
    found = {where: _leaks(data, keys) for where, data in searched.items()}
    tally.add(AREA, "places searched", len(searched))
    tally.add(AREA, "secrets found", sum(map(len, found.values())))
    tally.note(
        AREA,
        f"searched {len(files)} files ({sum(map(len, files.values())) / 1e6:.1f} MB), "
        f"{len(dump) / 1e3:.0f} k chars of store rows and {len(output) / 1e3:.0f} k chars of "
        "command output for the key and its ends",
    )
    assert {where: frags for where, frags in found.items() if frags} == {}

    # Positive controls: the searches read what the runs wrote.
    names = set(files)
    assert "recorded.jsonl" in names and "report.html" in names
    assert any(n.startswith("reports/") for n in names), names
    assert any(n.startswith("parquet/") for n in names), names
    assert any(n.startswith("prefect-home/") for n in names), names
    recording = files["recorded.jsonl"].decode()
    assert "<librarian_response>" in recording and server.base_url not in recording
    assert "weeknight-dal" in dump and "401" in dump
    prefect_files = b"".join(d for n, d in files.items() if n.startswith("prefect-home/"))
    assert str(tmp_path / "notes").encode() in prefect_files  # flow parameters are in there
