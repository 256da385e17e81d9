"""A run with nothing to check ends ``unchecked``, never ``ok`` (issue 46): in the CLI's
summary and exit code, the store, the run report, Prefect's state and batch's counts.
Real processes, a real DuckDB file, a real (throwaway) Prefect API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]


def _spec(tmp: Path) -> Path:
    done = json.dumps({"done": True, "message": "The task was completed."})
    (tmp / "script.jsonl").write_text(json.dumps({"text": done}) + "\n", encoding="utf-8")
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: no-check
version: "1"
transport: xct
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: Say hello.
tools:
  - {{name: list_dir, description: List a folder., implementation: "builtin:list_dir"}}
""",
        encoding="utf-8",
    )
    (tmp / "ws").mkdir()
    return spec


def _toolwire(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "TOOLWIRE_DB": str(tmp / "s.db")}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args], capture_output=True, text=True,
        timeout=600, env=env, cwd=tmp,
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_a_run_without_checks_is_unchecked_everywhere(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    out = _toolwire(tmp_path, "run", str(spec), "--workspace", "ws", "--no-prefect")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("unchecked") >= 2, out.stderr  # the status, and why
    assert "nothing proved the task done" in out.stderr
    con = duckdb.connect(str(tmp_path / "s.db"), read_only=True)
    try:
        [(run_id, status)] = con.execute("select run_id, status from runs").fetchall()
        [(report,)] = con.execute(
            "select markdown from reports where run_id = ?", [run_id]
        ).fetchall()
    finally:
        con.close()
    assert status == "unchecked"
    assert "status: **unchecked** (the spec declares no check" in report

    # Prefect: a Completed state named Unchecked; batch counts it apart.
    out = _toolwire(tmp_path, "run", str(spec), "--workspace", "ws", "--prefect")
    assert out.returncode == 0, out.stderr
    out = _toolwire(tmp_path, "batch", str(spec), "--workspace", "ws")
    assert "(0 Failed, 1 unchecked)" in out.stderr, out.stderr
