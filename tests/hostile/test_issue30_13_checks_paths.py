"""Issue 30 item 13: a spec's ``checks`` that reach outside the workspace.

``checks.lists: '/etc/*'`` passed ``spec check``, then the run died with a
``NotImplementedError`` traceback (pathlib refuses absolute globs) and stayed
``running``; ``'../../../../../../../../**/*.md'`` walked ``/`` and died with a
``RecursionError``. Now ``spec check`` refuses absolute and ``..`` paths with
a located one-line error, and the checks themselves (reached without ``spec
check``, or on a folder too deep to walk) end the run ``Failed`` with
``RUN_CHECK_FAILED``: never a traceback, never a run left ``running``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.agent.checks import RUN_CHECK_FAILED, check_problems, run_checks
from toolwire.spec.model import CheckSpec
from toolwire.store import Store

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 30: checks outside the workspace"
HOSTILE_CHECKS = [
    ("index.md", "/etc/*"),
    ("index.md", "../../../../../../../../**/*.md"),
    ("../x", None),
    ("/etc/passwd", None),
    ("index.md", "notes/../../*"),
    ("index.md", "~/*"),
    ("index.md", "C:/Windows/*"),
]


def _spec(folder: Path, file: str, lists: str | None) -> Path:
    (folder / "done.jsonl").write_text(
        json.dumps({"text": json.dumps({"done": True, "message": "Done."})}) + "\n"
    )
    check = {"file": file} if lists is None else {"file": file, "lists": lists}
    spec = folder / "agent.yaml"
    spec.write_text(
        f"""name: hostile-checks
version: "1"
transport: xct
model: "replay:done.jsonl"
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: Write index.md.
tools:
  - name: list_dir
    description: List a folder.
    implementation: builtin:list_dir
checks:
  - {json.dumps(check)}
""",
        encoding="utf-8",
    )
    return spec


def _toolwire(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args],
        capture_output=True, text=True, env=env, timeout=180, cwd=cwd,
    )  # fmt: skip


@pytest.mark.timeout(600)
def test_spec_check_and_run_refuse_paths_outside_the_workspace(
    tmp_path: Path, tally: Tally
) -> None:
    for i, (file, lists) in enumerate(HOSTILE_CHECKS):
        folder = tmp_path / f"case{i}"
        (folder / "ws").mkdir(parents=True)
        spec = _spec(folder, file, lists)
        checked = _toolwire("spec", "check", str(spec), cwd=folder)
        assert checked.returncode != 0, (file, lists, checked.stdout)
        assert "Traceback" not in checked.stderr, checked.stderr
        assert "checks" in checked.stderr and "workspace" in checked.stderr, checked.stderr
        ran = _toolwire(
            "run", str(spec), "--workspace", str(folder / "ws"),
            "--db", str(folder / "store.duckdb"), cwd=folder,
        )  # fmt: skip
        assert ran.returncode != 0
        assert "Traceback" not in ran.stderr, ran.stderr
        if (folder / "store.duckdb").exists():  # refused before the run was recorded
            with Store(folder / "store.duckdb") as store:
                assert not store.query("SELECT 1 FROM runs WHERE status = 'running'", [])[1]
        tally.add(AREA, "inputs tried")
        tally.add(AREA, "rejected with a code")


def test_checks_reached_without_spec_check_fail_instead_of_crashing(
    tmp_path: Path, tally: Tally
) -> None:
    (tmp_path / "index.md").write_text("- notes/a.md\n")
    for file, lists in HOSTILE_CHECKS:
        # model_construct: what a caller that skipped the spec's validation would hand over.
        check = CheckSpec.model_construct(file=file, lists=lists)
        failed = run_checks([check], tmp_path)
        assert failed is not None and failed.code == RUN_CHECK_FAILED, (file, lists)
        tally.add(AREA, "inputs tried")
        tally.add(AREA, "rejected with a code")


def test_a_glob_that_matches_nothing_fails(tmp_path: Path, tally: Tally) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n")
    (tmp_path / "index.md").write_text("- notes/a.md\n")
    assert check_problems([CheckSpec(file="index.md", lists="notes/**/*.md")], tmp_path) == []
    problems = check_problems([CheckSpec(file="index.md", lists="note/**/*.md")], tmp_path)
    assert problems and "matches no file" in problems[0]
    tally.add(AREA, "inputs tried", 2)
    tally.add(AREA, "rejected with a code")


def test_a_folder_too_deep_to_walk_fails_the_check(tmp_path: Path, tally: Tally) -> None:
    (tmp_path / "index.md").write_text("- x\n")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(1100):  # deeper than Python's recursion limit lets os.fwalk go
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("deep.md", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        failed = run_checks([CheckSpec(file="index.md", lists="**/*.md")], tmp_path)
        assert failed is not None and failed.code == RUN_CHECK_FAILED
    finally:
        _remove_chain(tmp_path, 1100)  # pytest's own clean-up would recurse too deep
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "rejected with a code")


def _remove_chain(top: Path, depth: int) -> None:
    """Remove ``top/d/d/.../deep.md`` from the bottom up, without recursion."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        for _ in range(depth):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        os.unlink("deep.md", dir_fd=fds[-1])
        for parent in reversed(fds[:-1]):
            os.close(fds.pop())
            os.rmdir("d", dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)
