"""`spec check` rejects what `run` and `serve` would (#19 item 2): real processes.

A cron Prefect refuses, a missing prompt pack, a missing replay script or GGUF file and a
missing schedule workspace each fail `spec check` with file:line:col at the key
that causes it, and `serve` refuses the same spec in one line, no traceback,
before it looks for a Prefect server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"

GOOD = f"""name: nightly
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking]
schedule:
  cron: "0 6 * * *"
  workspace: notes
"""


def toolwire(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWIRE), *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "script.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "spec.yaml").write_text(GOOD)
    return tmp_path


def test_every_shipped_spec_passes_the_full_check() -> None:
    ran = toolwire("spec", "check", *sorted((REPO / "specs").glob("*.yaml")))
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_good_scheduled_spec_passes(spec_dir: Path) -> None:
    ran = toolwire("spec", "check", spec_dir / "spec.yaml")
    assert ran.returncode == 0, ran.stderr


def test_a_gguf_path_that_is_there_passes(spec_dir: Path) -> None:
    """Relative to the spec's folder, as `run` resolves it (issue 47)."""
    (spec_dir / "models").mkdir()
    (spec_dir / "models" / "mine.gguf").write_bytes(b"GGUF")
    spec = spec_dir / "spec.yaml"
    spec.write_text(GOOD.replace("replay:script.jsonl", "llamacpp:models/mine.gguf"))
    ran = toolwire("spec", "check", spec)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "words"),
    [
        ('"0 6 * * *"', '"0 25 * * *"', 9, "schedule.cron", "Prefect rejects '0 25 * * *'"),
        ("librarian-small", "no-such-pack", 5, "prompt_pack", "no-such-pack"),
        ("replay:script.jsonl", "replay:gone.jsonl", 4, "model.name", "does not exist"),
        ("replay:script.jsonl", "llamacpp:models/gone.gguf", 4, "model.name", "no GGUF file at"),
        ("workspace: notes", "workspace: gone", 10, "schedule.workspace", "no folder at"),
    ],
)
def test_check_and_serve_reject_what_would_fail_later(
    spec_dir: Path, old: str, new: str, line: int, key: str, words: str
) -> None:
    spec = spec_dir / "spec.yaml"
    spec.write_text(GOOD.replace(old, new))
    checked = toolwire("spec", "check", spec)
    assert checked.returncode == 1
    assert f"{spec}:{line}:" in checked.stderr and f"{key}:" in checked.stderr
    assert words in checked.stderr and "Traceback" not in checked.stderr
    served = toolwire("serve", spec)
    assert served.returncode == 2, served.stderr
    assert words in served.stderr and "Traceback" not in served.stderr
    assert len(served.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "cron",
    ["0 25 * * *", "0 6 * * *", "*/5 * * * 8", "H 6 * * *", "0 0 31 2 *", "0 6 * * MON-FRI",
     "61 * * * *", "* * * *", "0 6 * * * *", "R 1 * * *"],
)  # fmt: skip
def test_fast_cron_check_agrees_with_prefects_schedule_model(cron: str) -> None:
    # `spec check` loads Prefect's croniter without importing Prefect (seconds saved);
    # Prefect's own CronSchedule must reach the same verdict.
    from toolwire.run.preflight import (
        _prefect_croniter,
        _prefect_model_problem,
        prefect_cron_problem,
    )

    assert _prefect_croniter() is not None  # the fast path is the one under test
    fast, model = prefect_cron_problem(cron, "UTC"), _prefect_model_problem(cron, "UTC")
    assert (fast is None) == (model is None), (fast, model)
