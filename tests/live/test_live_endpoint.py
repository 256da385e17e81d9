"""The live tier: a real OpenAI-compatible endpoint, when the environment names one.

Runs only with ``TOOLWIRE_OPENAI_BASE_URL`` or an API key
(``TOOLWIRE_OPENAI_API_KEY`` / ``OPENAI_API_KEY``) set; skipped otherwise, so
``./scripts/test -m live`` reports skips, never "no tests ran". Which model and
server: ``TOOLWIRE_LIVE_MODEL`` (default ``gpt-4o-mini``) and
``TOOLWIRE_LIVE_SERVER`` (``openai``, ``ollama``, ``vllm`` or ``llamacpp``;
default ``openai``). Every run is a ``--dry-run``: no note is written.

What must hold against any real endpoint: the run ends (ok, or Failed for the
model's own answers, never for a provider fault), every raw reply is stored,
and the key appears in no output, store row or report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"
KEY = os.environ.get("TOOLWIRE_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
BASE_URL = os.environ.get("TOOLWIRE_OPENAI_BASE_URL", "")

# A skip mark, not a module-level skip: the tests are collected and reported as
# skipped (pytest exit 0), where a skipped module would leave "no tests ran" (exit 5).
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not (KEY or BASE_URL),
        reason="live tier: set TOOLWIRE_OPENAI_BASE_URL and/or TOOLWIRE_OPENAI_API_KEY "
        "(TOOLWIRE_LIVE_MODEL, TOOLWIRE_LIVE_SERVER choose the model)",
    ),
]

NOTES = {
    "bread.md": "# Sourdough starter\n\nFeed the starter twice a day with flour and water.\n",
    "vacuum.md": "# VACUUM\n\nVACUUM reclaims space held by dead tuples in PostgreSQL.\n",
}


def _spec(tmp_path: Path) -> Path:
    model = os.environ.get("TOOLWIRE_LIVE_MODEL", "gpt-4o-mini")
    server = os.environ.get("TOOLWIRE_LIVE_SERVER", "openai")
    spec = tmp_path / "live.yaml"
    spec.write_text(
        f"""name: librarian-live
version: "1"
transport: xml_attrless
model: {{name: {json.dumps("openai:" + model)}, server: {server}, max_tokens: 400,
         temperature: 0.0, timeout_s: 120}}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: 1
  max_operations: 2
  min_confidence: 0.0
  allowed_kinds: [retag_note, retitle_note]
""",
        encoding="utf-8",
    )
    return spec


def test_librarian_dry_run_against_the_live_endpoint(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    ws.mkdir()
    for name, text in NOTES.items():
        (ws / name).write_text(text, encoding="utf-8")
    db = tmp_path / "live.duckdb"
    ran = subprocess.run(
        [str(TOOLWIRE), "run", str(_spec(tmp_path)), "--workspace", str(ws), "--db", str(db),
         "--dry-run", "--no-prefect"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    output = ran.stdout + ran.stderr
    assert ran.returncode in (0, 1), output[-3000:]
    assert "Traceback" not in output
    assert "LLM_PROVIDER_" not in output, "the endpoint did not answer: " + output[-2000:]

    sql = subprocess.run(
        [str(TOOLWIRE), "sql", "--db", str(db), "--format", "json",
         "SELECT r.provider, r.status, count(a.raw_text) AS replies, "
         "min(length(a.raw_text)) AS shortest FROM runs r JOIN attempts a USING (run_id) "
         "GROUP BY ALL"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    (row,) = json.loads(sql.stdout)
    assert row["provider"] == "openai" and row["replies"] >= len(NOTES)
    assert row["shortest"] > 0  # every real reply is kept whole

    if KEY:
        assert KEY not in output
        assert KEY.encode() not in db.read_bytes()
        for report in (tmp_path / "reports").glob("*.md"):
            assert KEY not in report.read_text(encoding="utf-8")
