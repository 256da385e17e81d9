"""An internal error's traceback stays in the store, for `toolwire show` (issue 47).

Prefect's logs and the serve terminal carry a failed run as one line with its code;
for an exception toolwire did not foresee (INTERNAL_ERROR), the traceback is what a
developer needs, so the run's stored report keeps it and `show` prints it. A real run
on a real store, its model call broken by a wrapper that raises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local


class _Broken:
    """The run's provider, whose every call raises an exception nobody typed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def complete(self, request: Any) -> Any:
        raise RuntimeError("boom in a model call")


def test_an_internal_error_keeps_its_traceback_for_show(tmp_path: Path) -> None:
    from toolwire.errors import ToolwireError
    from toolwire.jobs import RunOptions
    from toolwire.lifecycle import run_job

    spec, ws, db = _spec(tmp_path, [VALID]), _workspace(tmp_path), tmp_path / "s.duckdb"
    with pytest.raises(ToolwireError) as raised:
        run_job(RunOptions(str(spec), str(ws), str(db)), wrap=_Broken)
    assert raised.value.code == "INTERNAL_ERROR"

    def show(*flags: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-m", "toolwire", "show", run_id, "--db", str(db), *flags],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        return ran.stdout

    listed = subprocess.run(
        [sys.executable, "-m", "toolwire", "sql", "select run_id from runs", "--db", str(db),
         "--format", "json"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (run_id,) = [row["run_id"] for row in json.loads(listed.stdout)]
    text = show()
    assert "INTERNAL_ERROR" in text and "Traceback (most recent call last)" in text
    assert "RuntimeError: boom in a model call" in text and "in complete" in text
    document = json.loads(show("--format", "json"))
    assert document["traceback"].rstrip().endswith("RuntimeError: boom in a model call")
