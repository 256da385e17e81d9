"""Apply / undo through the journal on a copy of the sample notes: crash safety, git commit."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.errors import RunNotFound, WorkspaceError
from toolwire.librarian.journal import write_ahead as journal
from toolwire.librarian.journal.disk import journal_state
from toolwire.librarian.journal.git_commit import git_commit
from toolwire.librarian.journal.write_ahead import (
    CRASH_ENV,
    apply_plan,
    diff_plan,
    recover,
    undo_run,
)
from toolwire.librarian.notes.changes import FileChange, render_changes
from toolwire.librarian.notes.workspace import Workspace, sha256_hex

pytestmark = pytest.mark.local

NOTES = Path(__file__).resolve().parents[2] / "data" / "notes"
SRC = Path(__file__).resolve().parents[2] / "src"


def op(
    kind: str, target: str, *, title: str = "", body: str = "-", path: str | None = None
) -> Operation:
    return Operation("op", kind, None if path else target, path, title, body, "r", 0.9)


PLAN_OPS = [
    op("retag_note", "home/cooking/sourdough-starter", body="cooking"),
    op("retitle_note", "tech/networking/wireguard-tunnel", title="Bringing up a WireGuard tunnel"),
    op("retag_note", "home/finance/tax-checklist", body="finance"),  # CRLF file
    op("rewrite_note", "inbox/alerting-rules-draft", title="Alerting rules (draft)",
       body="# Alerting rules (draft)\n\nMerged into [[prometheus-alerting]].\n"),
    op("create_note", "", path="home/cooking/bread-index.md", title="Bread",
       body="See [[sourdough-starter]]."),
    op("create_note", "", path="new-folder/deeper/note.md", title="Deep", body="A new folder."),
    op("retag_note", "pg-tuning", body="databases\nobservability"),  # the large note
]  # fmt: skip


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file outside .toolwire (and the set of folders with files)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".toolwire") or not path.is_file():
            continue
        out[rel] = sha256_hex(path.read_bytes())
    return out


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    shutil.copytree(NOTES, root)
    return root


@pytest.fixture
def plan(notes: Path) -> list[FileChange]:
    changes = render_changes(Workspace.load(notes), PLAN_OPS)
    assert len(changes) == len(PLAN_OPS)
    return changes


def test_apply_then_undo_restores_every_byte(notes: Path, plan: list[FileChange]) -> None:
    before = snapshot(notes)
    written = apply_plan(notes, "run-1", plan)
    assert written == [c.path for c in plan]
    after = snapshot(notes)
    for change in plan:
        assert after[change.path] == change.new_sha256
    untouched = set(before) - {c.path for c in plan}
    assert all(after[p] == before[p] for p in untouched)
    assert journal_state(notes, "run-1") == "applied"
    manifest = json.loads((notes / ".toolwire/journal/run-1/manifest.json").read_text())
    assert [e["path"] for e in manifest["changes"]] == written
    assert [e["old_sha256"] for e in manifest["changes"]] == [c.old_sha256 for c in plan]
    assert (notes / ".toolwire/.gitignore").read_text() == "*\n"
    assert Workspace.load(notes).warnings == []  # journal and temp files are invisible

    restored = undo_run(notes, "run-1")
    assert sorted(restored) == sorted(written)
    assert snapshot(notes) == before
    assert journal_state(notes, "run-1") == "undone"
    # undone creates are kept in the trash, never deleted
    trash = notes / ".toolwire/trash/run-1/home/cooking/bread-index.md"
    assert trash.read_bytes() == next(c.new for c in plan if c.path.endswith("bread-index.md"))
    with pytest.raises(WorkspaceError, match="already undone"):
        undo_run(notes, "run-1")


def test_dry_run_diff_writes_nothing(notes: Path, plan: list[FileChange]) -> None:
    before = snapshot(notes)
    diff = diff_plan(plan)
    assert snapshot(notes) == before and not (notes / ".toolwire").exists()
    assert (
        "--- a/home/cooking/sourdough-starter.md\n+++ b/home/cooking/sourdough-starter.md\n" in diff
    )
    assert "--- /dev/null\n+++ b/new-folder/deeper/note.md\n" in diff
    assert "-- databases\n-topic: databases\n+- cooking\n+topic: cooking\n" in diff
    assert diff.count("\n+++ ") + diff.startswith("+++ ") == len(plan)


def test_diff_marks_missing_final_newline() -> None:
    diff = diff_plan([FileChange("a.md", b"old", b"new")])
    assert diff.endswith("-old\n\\ No newline at end of file\n+new\n\\ No newline at end of file\n")


def test_apply_refuses_a_note_changed_since_the_plan(notes: Path, plan: list[FileChange]) -> None:
    before_edit = snapshot(notes)
    (notes / "home/finance/tax-checklist.md").write_bytes(b"edited by hand\n")
    before = snapshot(notes)
    assert before != before_edit
    with pytest.raises(WorkspaceError, match="note changed since the plan: home/finance/tax"):
        apply_plan(notes, "run-2", plan)
    assert snapshot(notes) == before
    assert not (notes / ".toolwire/journal/run-2").exists()


def test_apply_refuses_a_create_whose_path_appeared(notes: Path, plan: list[FileChange]) -> None:
    (notes / "home/cooking/bread-index.md").write_text("someone was faster")
    with pytest.raises(WorkspaceError, match="bread-index.md"):
        apply_plan(notes, "run-3", plan)


def test_edit_during_apply_rolls_the_run_back(
    notes: Path, plan: list[FileChange], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(notes)
    real_move = journal._move_to
    calls = []

    def move_and_edit(*args: object, **kwargs: object) -> None:
        real_move(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(1)
        if len(calls) == 2:  # someone edits a later note mid-apply
            (notes / "inbox/alerting-rules-draft.md").write_text("a concurrent edit\n")

    monkeypatch.setattr(journal, "_move_to", move_and_edit)
    with pytest.raises(WorkspaceError, match="rolled back"):
        apply_plan(notes, "run-4", plan)
    after = snapshot(notes)
    assert journal_state(notes, "run-4") == "aborted"
    assert (notes / "inbox/alerting-rules-draft.md").read_text() == "a concurrent edit\n"
    del after["inbox/alerting-rules-draft.md"]
    expected = dict(before)
    del expected["inbox/alerting-rules-draft.md"]
    assert after == expected  # every other note back to its old bytes
    with pytest.raises(WorkspaceError, match="rolled back when it failed"):
        undo_run(notes, "run-4")


def test_undo_refuses_an_edited_note_unless_forced(notes: Path, plan: list[FileChange]) -> None:
    before = snapshot(notes)
    apply_plan(notes, "run-5", plan)
    applied = snapshot(notes)
    edited = notes / "home/cooking/sourdough-starter.md"
    edited.write_text("my own edit\n")
    with pytest.raises(WorkspaceError, match="edited since the run: home/cooking/sourdough"):
        undo_run(notes, "run-5")
    now = snapshot(notes)
    assert {p: h for p, h in now.items() if "sourdough" not in p} == {
        p: h for p, h in applied.items() if "sourdough" not in p
    }  # all or nothing: no file was restored
    restored = undo_run(notes, "run-5", force=True)
    assert "home/cooking/sourdough-starter.md" in restored
    assert snapshot(notes) == before
    kept = notes / ".toolwire/trash/run-5/home/cooking/sourdough-starter.md"
    assert kept.read_text() == "my own edit\n"


def test_undo_unknown_run(notes: Path) -> None:
    with pytest.raises(RunNotFound):
        undo_run(notes, "never-ran")
    with pytest.raises(WorkspaceError, match="safe folder name"):
        undo_run(notes, "../escape")


def test_empty_plan_writes_no_journal(notes: Path) -> None:
    assert apply_plan(notes, "run-6", []) == []
    assert not (notes / ".toolwire").exists()


def test_a_second_apply_with_the_same_run_id_is_refused(notes: Path) -> None:
    ws = Workspace.load(notes)
    first = render_changes(ws, PLAN_OPS[:1])
    apply_plan(notes, "run-7", first)
    second = render_changes(Workspace.load(notes), PLAN_OPS[1:2])
    with pytest.raises(WorkspaceError, match="already has a journal"):
        apply_plan(notes, "run-7", second)


def test_recover_with_nothing_to_do(notes: Path) -> None:
    assert recover(notes) == []


# ---------------------------------------------------------------- crash mid-apply

CHILD = """
import base64, json, sys
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.journal.write_ahead import apply_plan
data = json.load(open(sys.argv[2]))
changes = [FileChange(c["path"], None if c["old"] is None else base64.b64decode(c["old"]),
                      base64.b64decode(c["new"])) for c in data]
apply_plan(sys.argv[1], "crash-run", changes)
print("finished")
"""


def run_child(root: Path, plan: list[FileChange], tmp_path: Path, crash_after: int) -> int:
    spec = tmp_path / "plan.json"
    enc = [
        {
            "path": c.path,
            "old": None if c.old is None else base64.b64encode(c.old).decode(),
            "new": base64.b64encode(c.new).decode(),
        }
        for c in plan
    ]
    spec.write_text(json.dumps(enc))
    env = dict(os.environ, PYTHONPATH=str(SRC), **{CRASH_ENV: str(crash_after)})
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(spec)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "finished" not in proc.stdout, proc.stderr
    return proc.returncode


@pytest.mark.parametrize("k", [1, 3, 6])
def test_crash_after_k_writes_then_recover_then_undo(
    notes: Path, plan: list[FileChange], tmp_path: Path, k: int
) -> None:
    before = snapshot(notes)
    assert run_child(notes, plan, tmp_path, k) == -signal.SIGKILL
    mid = snapshot(notes)
    states = []
    for change in plan:
        current = mid.get(change.path)
        assert current in (change.old_sha256, change.new_sha256), change.path
        states.append(current == change.new_sha256)
    assert states == [True] * k + [False] * (len(plan) - k)  # written in plan order
    assert journal_state(notes, "crash-run") == "applying"

    assert recover(notes) == ["crash-run"]
    after = snapshot(notes)
    assert all(after[c.path] == c.new_sha256 for c in plan)
    assert journal_state(notes, "crash-run") == "applied"
    assert recover(notes) == []  # idempotent
    assert snapshot(notes) == after

    undo_run(notes, "crash-run")
    assert snapshot(notes) == before


def test_recover_reports_a_note_edited_after_the_crash(
    notes: Path, plan: list[FileChange], tmp_path: Path
) -> None:
    assert run_child(notes, plan, tmp_path, 2) == -signal.SIGKILL
    victim = plan[4].path  # not yet written: a create; someone makes the file by hand
    (notes / victim).write_text("hand made\n")
    with pytest.raises(WorkspaceError, match=r"bread-index\.md.*toolwire undo"):
        recover(notes)
    assert journal_state(notes, "crash-run") == "applying"
    after = snapshot(notes)
    for change in plan:  # every other file was rolled forward anyway
        if change.path != victim:
            assert after[change.path] == change.new_sha256
    assert (notes / victim).read_text() == "hand made\n"


# ---------------------------------------------------------------- git


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")  # fmt: skip
    out = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def test_git_commit_contains_the_run_id(notes: Path, plan: list[FileChange]) -> None:
    git(notes, "init", "-q")
    git(notes, "add", "-A")
    git(notes, "commit", "-q", "-m", "initial")
    (notes / "unrelated.md").write_text("staged by the user, not part of the run\n")
    git(notes, "add", "unrelated.md")

    apply_plan(notes, "run-git", plan)
    sha = git_commit(notes, "run-git", [c.path for c in plan])
    assert sha and len(sha) == 40
    assert git(notes, "rev-parse", "HEAD").strip() == sha
    message = git(notes, "log", "-1", "--format=%B")
    assert "run-git" in message
    committed = set(git(notes, "show", "--name-only", "--format=", "HEAD").split())
    assert committed == {c.path for c in plan}
    status = git(notes, "status", "--porcelain")
    assert ".toolwire" not in status  # the journal stays out of git
    assert "A  unrelated.md" in status  # the user's staged file is left as it was
    # nothing new to commit -> None
    assert git_commit(notes, "run-git", [c.path for c in plan]) is None


def test_git_commit_outside_a_repo_is_none(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.md").write_text("a")
    assert git_commit(root, "run", ["a.md"]) is None
    assert not (root / ".toolwire").exists()
