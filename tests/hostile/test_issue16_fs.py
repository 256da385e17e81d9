"""Issue #16, the file-system holes: nothing read, written or moved outside; nothing left behind.

Items 3, 4, 6, 13, 14, 15, 17, 20 and 21. Each case is an attack that worked
on the main of 2026-11-24 (the issue says how it was seen) and is refused or
handled now; the sentinel folder next to the workspace must be untouched after
each, and every note must be its old or new bytes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hostile.tally import Tally
from toolwire.errors import WorkspaceError
from toolwire.librarian.journal.git_commit import git_commit
from toolwire.librarian.journal.write_ahead import apply_plan, pending_recovery, recover, undo_run
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.notes.workspace import Workspace
from toolwire.tools.builtins import ToolFailed, write_file

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 16: file system"


def _tree(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder`` (links not followed): kind and bytes or target."""
    found: dict[str, Any] = {}
    if not folder.exists():
        return found
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            full = Path(here) / name
            st = os.lstat(full)
            rel = full.relative_to(folder).as_posix()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", full.read_bytes())
            else:
                found[rel] = ("dir",)
    return found


def _layout(tmp: Path) -> tuple[Path, Path]:
    ws, outside = tmp / "ws", tmp / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "a.md").write_bytes(b"# A\n\nold a\n")
    (ws / "sub" / "b.md").write_bytes(b"# B\n\nold b\n")
    (outside / "keep.md").write_bytes(b"outside, never touched\n")
    return ws.resolve(), outside.resolve()


def _plan(ws: Path) -> list[FileChange]:
    return [
        FileChange("a.md", (ws / "a.md").read_bytes(), b"# A\n\nnew a\n"),
        FileChange("sub/new.md", None, b"# New\n"),
    ]


# ---------------------------------------------------------------- items 3 and 4: .toolwire


@pytest.mark.timeout(60)
def test_item3_symlinked_toolwire_folder_is_refused_not_written_through(
    tmp_path: Path, tally: Tally
) -> None:
    ws, outside = _layout(tmp_path)
    os.symlink(outside, ws / ".toolwire")  # ln -s ../outside ws/.toolwire
    before_out, before_ws = _tree(outside), _tree(ws)
    for attempt in (
        lambda: apply_plan(ws, "run-3a", _plan(ws)),
        lambda: recover(ws),
        lambda: undo_run(ws, "run-3a"),
        lambda: pending_recovery(ws),
    ):
        with pytest.raises(WorkspaceError) as caught:
            attempt()
        assert caught.value.code in ("PATH_OUTSIDE_WORKSPACE", "RUN_NOT_FOUND"), caught.value
        tally.add(AREA, "inputs tried")
        tally.add(AREA, "rejected with a code")
    assert _tree(outside) == before_out  # no journal, lock or .gitignore landed outside
    assert _tree(ws) == before_ws  # and no note changed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("entry", [".gitignore", "lock", "journal", "trash"])
def test_item4_dangling_links_inside_toolwire_create_nothing_outside(
    entry: str, tmp_path: Path, tally: Tally
) -> None:
    ws, outside = _layout(tmp_path)
    if entry == "trash":  # undo --force of a create moves the note to trash: make that a link
        run = apply_plan(ws, "run-4", _plan(ws))
        assert run == ["a.md", "sub/new.md"]
        (ws / "sub" / "new.md").write_bytes(b"edited after the run\n")
    (ws / ".toolwire").mkdir(exist_ok=True)
    os.symlink(outside / f"planted-{entry}", ws / ".toolwire" / entry)
    before_out, before_ws = _tree(outside), _tree(ws)
    with pytest.raises(WorkspaceError) as caught:
        if entry == "trash":
            undo_run(ws, "run-4", force=True)
        else:
            apply_plan(ws, "run-4", _plan(ws))
    assert caught.value.code == "PATH_OUTSIDE_WORKSPACE", caught.value
    assert _tree(outside) == before_out
    after = _tree(ws)
    for rel in ("a.md", "sub/b.md", "sub/new.md"):  # every note its old or new bytes, in place
        assert after.get(rel) == before_ws.get(rel), rel
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "rejected with a code")


# ---------------------------------------------------------------- item 6: the swap race


def _swap_after_check(ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swap ``sub/`` for a link out right after the last path check passes: the window
    a concurrent process needs, made deterministic."""
    from toolwire.tools import builtins

    real = builtins.resolve_inside

    def check_then_swap(root: Path, rel: str) -> Path:
        found = real(root, rel)
        if (ws / "sub").is_dir() and not (ws / "sub").is_symlink():
            os.rename(ws / "sub", ws / "sub.real")
            os.symlink(outside, ws / "sub")
        return found

    monkeypatch.setattr(builtins, "resolve_inside", check_then_swap)


@pytest.mark.timeout(60)
def test_item6_folder_swapped_for_a_link_after_the_check_gets_no_write(
    tmp_path: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, outside = _layout(tmp_path)
    before = _tree(outside)
    _swap_after_check(ws, outside, monkeypatch)
    with pytest.raises(ToolFailed, match="symbolic link"):  # the executor makes it a result
        write_file(ws, "sub/b.md", "written through a swapped folder")
    assert _tree(outside) == before
    assert (ws / "sub.real" / "b.md").read_bytes() == b"# B\n\nold b\n"
    tally.add(AREA, "inputs tried")
    tally.add(AREA, "rejected with a code")


_SWAPPER = """
import os, sys, time
ws, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
sub, real = os.path.join(ws, "sub"), os.path.join(ws, "sub.real")
while not os.path.exists(stop):
    try:
        os.rename(sub, real); os.symlink(outside, sub)
        os.unlink(sub); os.rename(real, sub)
    except OSError:
        pass
"""


@pytest.mark.timeout(300)
def test_item6_concurrent_swapper_never_gets_a_write_outside(tmp_path: Path, tally: Tally) -> None:
    ws, outside = _layout(tmp_path)
    stop = tmp_path / "stop"
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(ws), str(outside), str(stop)])
    writes = refused = 0
    try:
        deadline = time.monotonic() + 15
        while writes < 4560 and time.monotonic() < deadline:
            writes += 1
            try:
                write_file(ws, f"sub/w{writes % 7}.md", f"write {writes}\n")
            except ToolFailed:
                refused += 1
    finally:
        stop.touch()
        swapper.wait(timeout=30)
    landed = [p for p in _tree(outside) if p != "keep.md"]
    tally.add(AREA, "inputs tried", writes)
    tally.add(AREA, "writes refused mid-swap", refused)
    tally.add(AREA, "writes outside", len(landed))
    tally.note(AREA, f"item 6: {writes} writes against a swapping folder, {refused} refused")
    assert landed == []
    assert writes > refused  # the race really ran: some writes went through, inside


# ---------------------------------------------------------------- item 13: bad front matter


@pytest.mark.timeout(120)
def test_item13_one_bad_note_is_skipped_with_a_warning_and_the_run_goes_on(
    tmp_path: Path, tally: Tally
) -> None:
    from toolwire.librarian.job import load_context, prepare_run, run_librarian

    ws, _ = _layout(tmp_path)
    (ws / "surrogate.md").write_text('---\ntitle: "\\ud800"\n---\nbody\n', encoding="utf-8")
    (ws / "newline-id.md").write_text('---\nid: "a\\nb"\n---\nbody\n', encoding="utf-8")
    (ws / "surrogate-tag.md").write_text('---\ntags: ["\\udfff"]\n---\nx\n', encoding="utf-8")
    loaded = Workspace.load(ws)
    assert sorted(loaded.notes) == ["a", "sub/b"]
    for name in ("surrogate.md", "newline-id.md", "surrogate-tag.md"):
        assert any(w.startswith(f"skipped {name}:") for w in loaded.warnings), loaded.warnings
    spec = _replay_spec(tmp_path, ["<librarian_response>garbage"] * 6)
    from toolwire.librarian.job import build_requests

    requests = build_requests(load_context(spec, workspace=ws), loaded)  # render: no crash
    assert requests and all(r.request_xml.encode("utf-8") for r in requests)
    ctx = prepare_run(spec, workspace=ws, db=tmp_path / "s.duckdb")
    result = run_librarian(ctx)
    assert result.error_code != "WORKSPACE_ERROR" and result.turns >= 1, result.error_message
    tally.add(AREA, "inputs tried", 3)
    tally.add(AREA, "skipped with a warning", 3)


def _replay_spec(tmp: Path, texts: list[str]) -> Path:
    lines = "".join(json.dumps({"text": t, "finish_reason": "stop"}) + "\n" for t in texts)
    (tmp / "script.jsonl").write_text(lines, encoding="utf-8")
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: issue16-fs
version: "1"
transport: xml_attrless
model:
  name: replay:script.jsonl
  constrain: none
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking]
constraints:
  batch_size: 50
""",
        encoding="utf-8",
    )
    return spec


# ---------------------------------------------------------------- item 14: long names


@pytest.mark.timeout(60)
@pytest.mark.parametrize("length", [242, 250, 255])
def test_item14_names_of_242_to_255_bytes_apply_and_undo(
    length: int, tmp_path: Path, tally: Tally
) -> None:
    ws, _ = _layout(tmp_path)
    existing = "e" * (length - 3) + ".md"
    created = "c" * (length - 3) + ".md"
    (ws / existing).write_bytes(b"# Long\n")
    plan = [
        FileChange(existing, b"# Long\n", b"# Long, retitled\n"),
        FileChange(f"sub/{created}", None, b"# Created\n"),
    ]
    assert apply_plan(ws, f"run-14-{length}", plan) == [existing, f"sub/{created}"]
    assert (ws / existing).read_bytes() == b"# Long, retitled\n"
    (ws / existing).write_bytes(b"edited\n")  # force: the edited copy goes to trash, same name
    undo_run(ws, f"run-14-{length}", force=True)
    assert (ws / existing).read_bytes() == b"# Long\n" and not (ws / "sub" / created).exists()
    tally.add(AREA, "inputs tried", 2)


# ---------------------------------------------------------------- item 15: folders for files


@pytest.mark.timeout(120)
def test_item15_lock_or_state_json_as_a_folder_is_an_error_with_a_code(
    tmp_path: Path, tally: Tally
) -> None:
    ws, _ = _layout(tmp_path)
    apply_plan(ws, "run-15", _plan(ws))
    state = ws / ".toolwire" / "journal" / "run-15" / "state.json"
    state.unlink()
    state.mkdir()
    with pytest.raises(WorkspaceError, match="folder"):
        undo_run(ws, "run-15")
    with pytest.raises(WorkspaceError, match="folder"):
        recover(ws)
    (ws / ".toolwire" / "lock").unlink()
    (ws / ".toolwire" / "lock").mkdir()
    state.rmdir()
    with pytest.raises(WorkspaceError, match="lock is a folder"):
        apply_plan(ws, "run-15b", [FileChange("c.md", None, b"c\n")])
    # From the command line: one line with the code, never a traceback.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    db = tmp_path / "store.duckdb"
    from toolwire.store import Store

    with Store(db).session():
        pass
    out = subprocess.run(
        [sys.executable, "-m", "toolwire", "undo", "run-15", "--workspace", str(ws), "--db",
         str(db)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0 and "Traceback" not in out.stderr + out.stdout, out.stderr
    assert out.stderr.startswith("error: "), out.stderr
    tally.add(AREA, "inputs tried", 4)
    tally.add(AREA, "rejected with a code", 4)


# ---------------------------------------------------------------- item 17: git


def _git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.mark.timeout(60)
def test_item17_commit_takes_paths_literally_and_runs_no_hook(tmp_path: Path, tally: Tally) -> None:
    ws, _ = _layout(tmp_path)
    (ws / "diary.md").write_text("my diary\n")
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "start")
    (ws / "diary.md").write_text("my diary, a private edit not to commit\n")
    marker = tmp_path / "hook-ran"
    for hook in ("pre-commit", "commit-msg", "post-commit", "prepare-commit-msg"):
        path = ws / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\necho {hook} >> '{marker}'\n")
        path.chmod(0o755)
    (ws / "diar?.md").write_text("# A model-made note with a glob in its name\n")
    # Issue 33: hooks run by default (the repository's rules); the opt-out runs none.
    sha = git_commit(ws, "run-17", ["diar?.md"], verify=False)
    assert sha
    committed = _git(ws, "show", "--name-only", "--format=", "HEAD").split()
    assert committed == ["diar?.md"]
    status = _git(ws, "status", "--porcelain")
    assert " M diary.md" in status  # still modified, not staged, not committed
    assert not marker.exists(), marker.read_text()
    tally.add(AREA, "inputs tried", 2)
    tally.add(AREA, "rejected with a code", 2)


# ---------------------------------------------------------------- item 20: dry runs


def _interrupted(ws: Path, run_id: str) -> None:
    """An apply killed after its journal was written, before the first note (k = 0)."""
    plan = _plan(ws)
    apply_plan(ws, run_id, plan)
    for change in plan:  # put the notes back as they were when the process died
        if change.old is None:
            (ws / change.path).unlink()
        else:
            (ws / change.path).write_bytes(change.old)
    state = ws / ".toolwire" / "journal" / run_id / "state.json"
    state.write_text(json.dumps({"state": "applying", "updated_at": 0, "detail": None}))


@pytest.mark.timeout(60)
def test_item20_pending_recovery_reports_and_writes_nothing(tmp_path: Path, tally: Tally) -> None:
    ws, _ = _layout(tmp_path)
    _interrupted(ws, "run-20")
    before = _tree(ws)
    line = pending_recovery(ws)
    assert line is not None and "run-20: applying, 2 note(s) to roll forward" in line
    assert recover(ws, dry_run=True) == ["run-20: applying, 2 note(s) to roll forward"]
    assert _tree(ws) == before  # not a byte, not the lock file
    assert recover(ws) == ["run-20"] and pending_recovery(ws) is None
    tally.add(AREA, "inputs tried")


@pytest.mark.timeout(120)
def test_item20_dry_run_does_not_roll_an_interrupted_journal_forward(tmp_path: Path) -> None:
    from toolwire.librarian.job import prepare_run, run_librarian

    ws, _ = _layout(tmp_path)
    _interrupted(ws, "run-20b")
    before = _tree(ws)
    ctx = prepare_run(
        _replay_spec(tmp_path, ["x"] * 6), workspace=ws, db=tmp_path / "s.duckdb", dry_run=True
    )
    run_librarian(ctx)
    assert _tree(ws) == before


# ---------------------------------------------------------------- item 21: kill -9 leftovers

_APPLIER = """
import sys
from pathlib import Path
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.journal.write_ahead import apply_plan
ws, run_id = Path(sys.argv[1]), sys.argv[2]
plan = [FileChange(f"n{i}.md", (ws / f"n{i}.md").read_bytes(), bytes([65 + i % 26]) * 400_000)
        for i in range(24)]
print("ready", flush=True)
apply_plan(ws, run_id, plan)
"""


@pytest.mark.timeout(600)
def test_item21_kill_9_during_apply_leaves_no_temp_file_after_recovery(
    tmp_path: Path, tally: Tally
) -> None:
    rng = random.Random(21)
    kills = leftovers_before = 0
    for k in range(20):
        ws = tmp_path / f"ws{k}"
        ws.mkdir()
        for i in range(24):
            (ws / f"n{i}.md").write_bytes(f"# old {i}\n".encode())
        olds = {f"n{i}.md": f"# old {i}\n".encode() for i in range(24)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _APPLIER, str(ws), f"run-{k}"], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"ready")
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        leftovers_before += len(list(ws.glob(".*.tmp")))
        recover(ws)
        assert sorted(p.name for p in ws.iterdir()) == sorted([*olds, ".toolwire"])
        for name, old in olds.items():
            data = (ws / name).read_bytes()
            assert data == old or data == bytes([65 + int(name[1:-3]) % 26]) * 400_000
    tally.add(AREA, "faults injected", kills)
    tally.note(AREA, f"item 21: {kills} kills, {leftovers_before} temp files left, all cleared")
