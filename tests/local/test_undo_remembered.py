"""`toolwire undo`, or a run's change taken back by hand, is the user's answer "not
this", and later runs keep to it.

Before, a nightly run wrote back what the user had undone or taken back as soon as one
run had come between (the decision ledger then held the applied bytes, so the restored
ones looked new); with no run between, a fresh copy of the notes was never decided
again. Real processes, the shipped spec and the bundled embedder, on a copy of the
sample notes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "specs" / "librarian.yaml"


def toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.md"))
        if ".toolwire" not in p.parts
    }


def run(ws: Path, db: Path) -> tuple[str, str]:
    """One librarian run; its id and what it printed."""
    done = toolwire("run", SPEC, "--workspace", ws, "--db", db, "--no-prefect")
    rows = toolwire(
        "sql", "--db", db, "--format", "json",
        "select run_id from runs order by started_at desc limit 1",
    )  # fmt: skip
    return json.loads(rows.stdout)[0]["run_id"], done.stderr


def applied(db: Path, run_id: str) -> int:
    rows = toolwire(
        "sql", "--db", db, "--format", "json",
        f"select count(*) as n from operations where run_id = '{run_id}' and status = 'applied'",
    )  # fmt: skip
    return int(json.loads(rows.stdout)[0]["n"])


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    ws = tmp_path / "notes"
    shutil.copytree(REPO / "data" / "notes", ws)
    return ws


def test_an_undone_run_is_not_written_back_by_later_runs(notes: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    original = digests(notes)
    first, _ = run(notes, db)
    assert applied(db, first) > 0
    changed = {p for p, d in digests(notes).items() if original[p] != d}
    run(notes, db)  # the nightly run in between
    toolwire("undo", first, "--workspace", notes, "--db", db)
    assert digests(notes) == original

    later, printed = run(notes, db)
    assert digests(notes) == original, "a run wrote back what the user undid"
    assert applied(db, later) == 0
    assert f"{len(changed)} note(s) left as you asked (toolwire undo" in printed
    answers = toolwire(
        "sql", "--db", db, "--format", "json",
        "select note_path, answer, source from review_answers order by note_path",
    )  # fmt: skip
    assert json.loads(answers.stdout) == [
        {"note_path": p, "answer": "not_a_topic", "source": "undo"} for p in sorted(changed)
    ]

    # Once the user edits one of them, it is theirs to have decided again.
    edited = sorted(changed)[0]
    with (notes / edited).open("a", encoding="utf-8") as f:
        f.write("\nOne more line.\n")
    again, printed = run(notes, db)
    now = digests(notes)
    assert applied(db, again) > 0 and now[edited] != original[edited]
    assert {p for p in changed if now[p] != original[p]} == {edited}
    assert f"{len(changed) - 1} note(s) left as you asked" in printed


def test_notes_given_back_their_old_bytes_another_way_are_decided_again(
    notes: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    pristine = tmp_path / "pristine"
    shutil.copytree(notes, pristine)
    first, _ = run(notes, db)
    after_first = digests(notes)
    # A fresh copy (the quick start run twice, a restore from backup): not an undo.
    shutil.rmtree(notes)
    shutil.copytree(pristine, notes)
    second, printed = run(notes, db)
    assert applied(db, second) == applied(db, first)
    assert digests(notes) == after_first
    assert "left as you asked" not in printed


def test_a_change_taken_back_by_hand_stays_taken_back(notes: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    original = {p: (notes / p).read_bytes() for p in digests(notes)}
    first, _ = run(notes, db)
    changed = sorted(p for p in original if (notes / p).read_bytes() != original[p])
    run(notes, db)  # a night in between
    # The user deletes what the run wrote to one note (its bytes are the old ones again).
    (notes / changed[0]).write_bytes(original[changed[0]])
    later, printed = run(notes, db)
    assert (notes / changed[0]).read_bytes() == original[changed[0]]
    assert applied(db, later) == 0
    assert "1 note(s) left as you asked" in printed and changed[0] in printed
    assert all((notes / p).read_bytes() != original[p] for p in changed[1:])
