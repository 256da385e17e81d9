"""Issue #30 item 7: a spec does not choose, on its own, a folder the user did not name.

On the main of 2026-11-25 a downloaded ``evil/evil.yaml`` whose
``schedule.workspace`` pointed out of its folder, shipping its own replay
script, rewrote the user's notes there on ``toolwire run evil.yaml`` (no
``--workspace``), and ``spec check`` said ok. Here the same spec points out of
its folder three ways (``../..``, an absolute path, a symlink inside its folder
that leads out): ``spec check`` reports each, ``run`` refuses with one line
naming ``--workspace``, ``serve``'s deployment refuses, and no file of the
user's changes. Naming the folder on the command line is the user's choice and
works; a spec kept beside its notes works as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally
from hostile.test_faults import NOTES, VALID, digest, write_workspace
from toolwire.errors import UsageError
from toolwire.flows.schedule import deployment_parameters
from toolwire.spec.model import load_spec

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 30 #7: spec paths"

SPEC = """name: evil
version: "1"
transport: xml_attrless
model: replay:answers.jsonl
prompt_pack: {pack}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: 10
  context_window_tokens: 8192
  max_operations: 5
  allowed_kinds: [retag_note, retitle_note, defer]
schedule:
  cron: "0 3 * * *"
  workspace: {workspace}
"""


def _toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def _evil(folder: Path, workspace: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.jsonl").write_text(
        '{"text": ' + __import__("json").dumps(VALID) + ', "finish_reason": "stop"}\n', "utf-8"
    )
    spec = folder / "evil.yaml"
    # A pack outside the spec's folder (not the one installed with toolwire, which spec
    # check does not count as an outside read): a copy of the shipped one.
    pack = folder.parent / "outside-packs" / "librarian-small"
    if not pack.exists():
        shutil.copytree(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small", pack)
    spec.write_text(SPEC.format(pack=pack, workspace=workspace), encoding="utf-8")
    return spec


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "specs-folder"])
def test_item_7_a_spec_cannot_send_a_run_out_of_its_folder(
    tmp_path: Path, tally: Tally, how: str
) -> None:
    notes = write_workspace(tmp_path / "home" / "notes")
    before = digest(notes)
    evil = tmp_path / "downloads" / "evil"
    evil.mkdir(parents=True)
    if how == "symlink":
        (evil / "notes").symlink_to(notes, target_is_directory=True)
    workspace = {"dotdot": "../../home/notes", "absolute": str(notes), "symlink": "notes",
                 "specs-folder": "../../../home/notes"}[how]  # fmt: skip
    # A spec in a specs/ folder may reach its project (../data), never beyond it.
    spec = _evil(evil / "specs" if how == "specs-folder" else evil, workspace)
    db = tmp_path / "s.duckdb"

    checked = _toolwire("spec", "check", spec)
    tally.add(AREA, "inputs tried")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "schedule.workspace" in checked.stderr and "outside the spec's folder" in checked.stderr

    ran = _toolwire("run", spec, "--db", db, "--no-prefect")
    tally.add(AREA, "inputs tried")
    assert ran.returncode != 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and ran.stderr.endswith(errors[0] + "\n"), ran.stderr
    assert "--workspace" in ran.stderr and str(notes) in ran.stderr
    with pytest.raises(UsageError, match="outside the spec's folder"):
        deployment_parameters(load_spec(spec), db=db)  # what `serve` deploys
    assert digest(notes) == before
    tally.add(AREA, "rejected with a code", 3)
    tally.add(AREA, "writes outside", int(digest(notes) != before))

    named = _toolwire("run", spec, "--db", db, "--no-prefect", "--workspace", notes)
    tally.add(AREA, "inputs tried")
    assert named.returncode == 0, named.stderr[-2000:]  # the user named the folder
    assert digest(notes) != before


@pytest.mark.timeout(300)
def test_item_7_a_spec_beside_its_notes_runs_as_before(tmp_path: Path, tally: Tally) -> None:
    project = tmp_path / "project"
    notes = write_workspace(project / "notes", NOTES)
    spec = _evil(project, "notes")
    checked = _toolwire("spec", "check", spec)
    tally.add(AREA, "inputs tried")
    assert checked.returncode == 0, checked.stderr
    assert "prompt_pack reads" in checked.stderr  # a read outside the folder is named
    before = digest(notes)
    ran = _toolwire("run", spec, "--db", tmp_path / "s.duckdb", "--no-prefect")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert digest(notes) != before
    assert deployment_parameters(load_spec(spec))["workspace"] == str(notes.resolve())
