"""A plain `toolwire run` reads and validates its spec once (issue 40).

The CLI used to read the spec four times before any model call (the job check, the
transport, the job, the run's own start); every later step takes the one resolved
record. Counted at the validation itself, ``spec.model.load_spec_text``, which every
spec read goes through.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_librarian_replay import VALID, _spec, _workspace
from typer.testing import CliRunner

from toolwire.cli import app
from toolwire.spec import model

pytestmark = pytest.mark.local


@pytest.mark.parametrize("extra", [[], ["--tooling-transport", "xml_attrless"]])
def test_a_plain_run_reads_its_spec_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    reads: list[str] = []
    validate = model.load_spec_text

    def counting(text: str, file: str = "<string>", base_dir: Path | None = None):
        reads.append(file)
        return validate(text, file, base_dir)

    monkeypatch.setattr(model, "load_spec_text", counting)
    spec = _spec(tmp_path, [VALID])
    args = ["run", str(spec), "--workspace", str(_workspace(tmp_path))]
    args += ["--db", str(tmp_path / "s.duckdb"), "--no-prefect", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert reads == [str(spec)]
