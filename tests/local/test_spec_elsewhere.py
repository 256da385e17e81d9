"""A spec kept in the user's own repository checks and runs (issue 42): it names a pack
installed with toolwire (``prompt_pack: librarian-small``), not a folder beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

SPEC = """name: mine
version: "1"
transport: xml_attrless
model: replay:empty.jsonl
prompt_pack: librarian-small
taxonomy:
  topics: [cooking, travel]
judgement:
  embedder: none
memory:
  synthesis: "off"
"""


def _toolwire(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_a_spec_in_another_repository_checks_and_runs(tmp_path: Path) -> None:
    repo = tmp_path / "my-notes-repo"
    (repo / "notes").mkdir(parents=True)
    (repo / "notes" / "trip.md").write_text("Travel to Lisbon: flights, hotel, trams.\n")
    (repo / "empty.jsonl").write_text("", encoding="utf-8")
    (repo / "librarian.yaml").write_text(SPEC, encoding="utf-8")
    checked = _toolwire(repo, "spec", "check", "librarian.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "outside the spec's folder" not in checked.stdout + checked.stderr
    ran = _toolwire(
        repo, "run", "librarian.yaml", "--workspace", "notes", "--db", "s.duckdb", "--no-prefect"
    )
    assert ran.returncode == 0, ran.stderr
