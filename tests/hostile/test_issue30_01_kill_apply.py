"""Issue #30 item 1: kill -9 anywhere in an apply, and a torn ``state.json``: every note is
byte-identical to before or after the run once recovery has run, and recovery never stops.

The round's report: with 20 kills aimed at the journal's ``state.json``, one of two
rounds left a note "neither old nor new" after recovery. Two sweeps here:

1. A child process applies a plan of 12 notes through the real journal and
   SIGKILLs itself at the k-th system call it makes (open, write, fsync, rename,
   unlink, mkdir, close...), for k spread over the whole apply (the journal
   copies, the manifest, every state write, every note's temp file, rename and
   folder fsync). A second child recovers and is itself killed at a random
   call; a third recovers to the end. Each note must then be its old bytes or
   its new bytes, all on the same side (the run is whole or absent), and no temp
   file may be left.
2. An apply killed half way, then its ``state.json`` cut at every length, zeroed
   or replaced by noise (what a sync tool copying the folder mid-apply, or a file
   system that renames before it writes, leaves). On the main of 2026-11-25
   recovery refused such a journal forever ("corrupt state.json"): every later
   run failed and the notes stayed half applied. Now the state is also in a
   checksummed ``states.log``, and the run rolls forward.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from hostile import test_faults as faults
from hostile.scale import LONG
from hostile.tally import Tally
from toolwire.librarian.journal.disk import journal_state
from toolwire.librarian.journal.write_ahead import apply_plan, recover
from toolwire.librarian.notes.changes import FileChange

AREA = "issue 30 #1: kill -9 in apply, torn state"
versions = faults.versions  # the fault tier's (old, new) digests of one whole run, as a fixture
NOTES = 12
OLD = {f"n{i:03d}.md": f"# Note {i}\n\nold body {i}\n" * (1 + i % 4) for i in range(NOTES)}
NEW = {p: t.replace("old body", "NEW body") + "Tagged.\n" for p, t in OLD.items()}

# Kill this process at the KILL_AT-th call of the OS functions the journal writes with.
CHILD = """
import json, os, signal, sys
mode, ws, run_id, kill_at, plan = sys.argv[1:6]
kill_at, calls = int(kill_at), [0]
def counted(real):
    def call(*args, **kwargs):
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
for name in ("open", "write", "fsync", "rename", "replace", "unlink", "mkdir", "fchmod", "close"):
    setattr(os, name, counted(getattr(os, name)))
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.journal.write_ahead import apply_plan, recover
if mode == "apply":
    changes = [FileChange(p, o.encode(), n.encode()) for p, o, n in json.load(open(plan))]
    apply_plan(ws, run_id, changes)
else:
    recover(ws)
print(calls[0])
"""


def _child(mode: str, ws: Path, kill_at: int, plan: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    return subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(ws), "run-1", str(kill_at), str(plan)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    for rel, text in OLD.items():
        (root / rel).write_bytes(text.encode())
    return root


def _sides(tally: Tally, ws: Path) -> set[str]:
    """Which version each note is ("old"/"new"); fails on a torn note or a leftover file."""
    sides = set()
    for rel in OLD:
        data = (ws / rel).read_bytes().decode()
        tally.add(AREA, "notes checked")
        torn = data not in (OLD[rel], NEW[rel])
        tally.add(AREA, "notes neither old nor new", int(torn))
        assert not torn, f"{rel} is neither its old nor its new text: {data[:80]!r}"
        sides.add("old" if data == OLD[rel] else "new")
    extra = sorted(p.name for p in ws.iterdir() if p.name not in OLD and p.name != ".toolwire")
    assert not extra, f"files left next to the notes: {extra}"
    return sides


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps([[p, OLD[p], NEW[p]] for p in OLD]), encoding="utf-8")
    return path


@pytest.mark.timeout(1800)
def test_item_1_kill_at_any_call_of_an_apply_leaves_every_note_old_or_new(
    tmp_path: Path, tally: Tally, plan: Path
) -> None:
    clean = _child("apply", _workspace(tmp_path / "clean"), -1, plan)
    assert clean.returncode == 0, clean.stderr
    total = int(clean.stdout.split()[-1])  # the OS calls of a whole apply
    rng = random.Random(30)
    step = 1 if LONG else max(1, total // 45)
    points = sorted({*range(1, total + 1, step), total - 1, total})
    for k in points:
        ws = _workspace(tmp_path / f"k{k}")
        killed = _child("apply", ws, k, plan)
        tally.add(AREA, "faults injected")
        assert killed.returncode == -9, (k, killed.stderr[-1000:])
        again = _child("recover", ws, rng.randint(1, 80), plan)  # recovery killed too
        tally.add(AREA, "faults injected", int(again.returncode == -9))
        done = _child("recover", ws, -1, plan)
        assert done.returncode == 0, (k, done.stderr[-1000:])
        sides = _sides(tally, ws)
        assert len(sides) == 1, f"kill at call {k}: the run is half applied: {sides}"
        tally.add(AREA, "runs recovered")
    tally.note(AREA, f"{len(points)} kill points over the {total} OS calls of a 12-note apply")


TORN = {
    "empty": b"",
    "zeros": b"\0" * 64,
    "noise": bytes(random.Random(1).randrange(256) for _ in range(80)),
    "unknown state": b'{"state": "appl',
    "another state": b'{"state": "pwned"}',
}


@pytest.mark.timeout(600)
def test_item_1_a_torn_state_file_never_blocks_recovery(
    tmp_path: Path, tally: Tally, plan: Path
) -> None:
    reference = _workspace(tmp_path / "reference")
    changes = [FileChange(p, OLD[p].encode(), NEW[p].encode()) for p in OLD]
    apply_plan(reference, "run-1", changes)
    state = reference / ".toolwire" / "journal" / "run-1" / "state.json"
    whole = state.read_bytes()
    cuts = {f"cut at {n}": whole[:n] for n in range(0, len(whole), 7)} | TORN
    for name, torn in cuts.items():
        ws = _workspace(tmp_path / f"ws-{len(list(tmp_path.iterdir()))}")
        apply_plan(ws, "run-1", changes)  # the whole apply, then half of it undone below
        for rel in list(OLD)[: NOTES // 2]:  # as if killed after half the notes
            (ws / rel).write_bytes(OLD[rel].encode())
        journal = ws / ".toolwire" / "journal" / "run-1"
        (journal / "state.json").write_bytes(torn)
        if (journal / "states.log").exists():  # its last line torn too: "applying" stays
            log = (journal / "states.log").read_bytes().splitlines(keepends=True)
            (journal / "states.log").write_bytes(b"".join(log[:1]) + log[1][:9])
        tally.add(AREA, "faults injected")
        recover(ws)  # on the old main: WorkspaceError, for this run and every later one
        assert _sides(tally, ws) == {"new"}, name
        assert journal_state(ws, "run-1") == "applied"
        tally.add(AREA, "runs recovered")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("state", ["applying", "applied"])
def test_item_1_kill_right_after_a_state_write_through_the_cli(
    tmp_path: Path,
    tally: Tally,
    versions: tuple[dict, dict],  # noqa: F811 - the fixture assigned above
    state: str,
) -> None:
    """The round's attack, through ``toolwire run``: SIGKILL the moment ``state.json`` says
    ``applying`` (no note written) or ``applied`` (every note written, the run not ended)."""
    old, new = versions
    ws, log = faults.write_workspace(tmp_path / "notes"), tmp_path / "log"
    db = tmp_path / "s.duckdb"
    spec = faults.write_spec(tmp_path, [faults.VALID])
    killed = faults.run_cli(log, *faults.run_args(spec, ws, db), FAULT_KILL=f"state:{state}")
    tally.add(AREA, "faults injected")
    assert killed.returncode == -9, killed.stderr[-2000:]
    faults.check_notes(tally, AREA, ws, old, new)
    faults.check_acked(tally, AREA, db, log)
    (crashed,) = faults.run_ids(db)
    assert faults.run_row(db, crashed) == ("running", None)
    assert faults.journal_state(ws, crashed) == state
    undone = faults.recover_and_undo(tally, AREA, tmp_path, ws, db, crashed, old)
    assert crashed in undone  # rolled forward (or already whole), then undone exactly
    tally.add(AREA, "runs recovered")
