"""Every README command's error paths print one error, never a traceback (#20, "Done when").

Each case is a real `toolwire` process given a missing file, an unwritable path
(a path *under a regular file*, which no user, root included, can create) or a
bad value. It must exit 1 or 2, say why on stderr, and print no Python
traceback on either stream. The Prefect cases run the flow for real (Prefect's
temporary API server), since that is where tracebacks used to come from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ws/ (notes), spec.yaml (replay), s.duckdb (one run), afile (a regular file)."""
    root = tmp_path_factory.mktemp("errors")
    _workspace(root)
    spec = _spec(root, [VALID])
    (root / "afile").write_text("not a folder\n")
    (root / "unreachable.yaml").write_text(
        spec.read_text().replace(
            "model: replay:script.jsonl",
            'model: {name: "openai:x", server: llamacpp, base_url: "http://127.0.0.1:9/v1",'
            " timeout_s: 5}",
        )
    )
    ran = _toolwire(root, "run", "spec.yaml", "--workspace", "notes", "--db", "s.duckdb",
                    "--dry-run", "--no-prefect")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return root


def _toolwire(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWIRE), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={
            **os.environ,
            "TOOLWIRE_DB": str(cwd / "s.duckdb"),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        },
    )


RUN = ("run", "spec.yaml", "--workspace", "notes", "--dry-run")
CASES: list[tuple[str, ...]] = [
    ("spec", "check", "missing.yaml"),
    ("spec", "check", "afile"),
    ("spec", "hash", "missing.yaml"),
    ("spec", "diff", "missing.yaml", "spec.yaml"),
    ("pack", "check", "missing"),
    ("pack", "hash", "afile"),
    ("render", "missing.yaml"),
    ("render", "spec.yaml", "--workspace", "missing"),
    ("parse", "missing.txt"),
    ("parse", "--transport", "bogus", "afile"),
    ("run", "missing.yaml", "--workspace", "notes"),
    ("run", "spec.yaml", "--workspace", "missing", "--no-prefect"),
    (*RUN, "--model", "bogus:x", "--no-prefect"),
    (*RUN, "--tooling-transport", "bogus"),
    (*RUN, "--record", "afile/r.jsonl", "--no-prefect"),
    (*RUN, "--db", "afile/s.duckdb", "--no-prefect"),
    (*RUN, "--record", "afile/r.jsonl"),
    (*RUN, "--db", "afile/s.duckdb"),
    ("run", "unreachable.yaml", "--workspace", "notes", "--dry-run", "--no-prefect"),
    ("run", "unreachable.yaml", "--workspace", "notes", "--dry-run"),
    ("undo", "nope", "--workspace", "notes"),
    ("runs", "--db", "missing.duckdb"),
    ("runs", "--db", "afile/s.duckdb"),
    ("show", "nope"),
    ("sql", "SELECT * FROM nope"),
    ("sql", "SELECT 1", "--db", "missing.duckdb"),
    ("profile", "show", "someone", "--db", "missing.duckdb"),
    ("batch", "missing.yaml", "-w", "notes"),
    ("batch", "spec.yaml", "-w", "missing"),
    ("serve", "missing.yaml"),
    ("serve", "spec.yaml"),  # no schedule
    ("check-store", "--db", "missing.duckdb"),
    ("check-store", "--dataset", "missing"),
    ("report", "--html", "afile/x.html"),
    ("report", "nope", "--html", "out.html"),
    ("export", "--parquet", "afile/out"),
    ("store", "merge", "missing.duckdb"),
    ("store", "merge", "."),  # only the target itself
    ("profile", "reset", "someone", "--db", "afile/s.duckdb"),
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) for c in CASES])
def test_error_path_is_one_error_not_a_traceback(place: Path, args: tuple[str, ...]) -> None:
    ran = _toolwire(place, *args)
    output = ran.stdout + ran.stderr
    assert "Traceback" not in output, output[-3000:]
    assert ran.returncode in (1, 2), (ran.returncode, output[-2000:])
    # `spec` commands print editor-style `file:line:col: message` lines; the rest `error: ...`.
    assert ran.stderr.strip(), "an error with nothing said"


def test_unreachable_server_under_prefect_is_the_same_one_line(place: Path) -> None:
    # Prefect used to log the typed fault three more times, once with a 50-line traceback.
    lines = {}
    for mode in ("--no-prefect", "--prefect"):
        ran = _toolwire(place, "run", "unreachable.yaml", "--workspace", "notes", "--dry-run", mode)
        assert ran.returncode == 1, ran.stderr
        lines[mode] = [
            ln for ln in ran.stderr.splitlines() if ln.startswith("error:") or "| ERROR" in ln
        ]
    assert len(lines["--prefect"]) == 1, lines
    assert lines["--prefect"] == lines["--no-prefect"]
    assert lines["--prefect"][0].startswith("error: LLM_PROVIDER_UNREACHABLE: cannot reach")
