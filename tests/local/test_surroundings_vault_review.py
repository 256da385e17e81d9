"""Safety round four: `toolwire review` when the files around a question changed.

On the main of 2026-11-26 the review read a note through ``open()`` on its path: a note
replaced since the run by a symlink out of the workspace was read at its target,
hashed, listed as an ``open`` question and shown by the prompt as the note, and an
answer about a read-only note was kept and written over it. Now the review reads
through the confined layer (a link is no note: the question is ``missing``) and refuses
an answer for a read-only note or folder in one line, keeping the question open.
Real processes (the console script) on a real store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from replay_spec import EMPTY_ANSWER, replay_spec

from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.notes.workspace import sha256_hex
from toolwire.store import Store
from toolwire.store.review import QuestionRow, record_questions

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"
NOTES = {"linked.md": b"# Linked\nSQL indexes\n", "ro.md": b"# Read only\nSQL plans\n"}


def _asked(tmp: Path) -> tuple[Path, Path]:
    """A vault, a store with a finished replayed run, and a question per note."""
    vault = tmp / "vault"
    vault.mkdir()
    for rel, data in NOTES.items():
        (vault / rel).write_bytes(data)
    spec = replay_spec(tmp, EMPTY_ANSWER, name="surroundings-review")
    db = tmp / "store.duckdb"
    result = run_librarian(prepare_run(spec, workspace=vault, db=db))
    assert result.status == "ok", result.error_message
    questions = [
        QuestionRow(
            note_path=rel,
            note_id=rel[:-3],
            content_sha256=sha256_hex(data),
            kind="deferred",
            current_topic=None,
            candidates=({"topic": "databases", "confidence": 0.6, "evidence": "db 0.60"},),
            why="databases 0.60 is below min_confidence",
        )  # fmt: skip
        for rel, data in NOTES.items()
    ]
    store = Store(db, create=False)
    record_questions(store, result.run_id, str(vault.resolve()), questions)
    del store  # the CLI opens the file next
    return vault, db


def _toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWIRE), *map(str, args)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "TOOLWIRE_USER": "ana"}, check=False,
    )  # fmt: skip


def _states(db: Path) -> dict[str, str]:
    listed = _toolwire("review", "--db", db, "--list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return {q["path"]: q["state"] for q in json.loads(listed.stdout)["questions"]}


def _one_line_error(done: subprocess.CompletedProcess[str], words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_note_replaced_by_a_link_out_is_never_read_as_the_note(tmp_path: Path) -> None:
    vault, db = _asked(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_bytes(NOTES["linked.md"])  # the same bytes: only a read could match them
    (vault / "linked.md").unlink()
    os.symlink(outside, vault / "linked.md")

    assert _states(db) == {"linked.md": "missing", "ro.md": "open"}
    _one_line_error(_toolwire("review", "--db", db, "-a", "linked.md=databases"), "is gone")
    assert outside.read_bytes() == NOTES["linked.md"]
    assert os.readlink(vault / "linked.md") == str(outside)


def test_an_answer_for_a_read_only_note_is_refused_and_the_question_stays_open(
    tmp_path: Path,
) -> None:
    vault, db = _asked(tmp_path)
    os.chmod(vault / "ro.md", 0o444)
    done = _toolwire("review", "--db", db, "-a", "ro.md=databases")
    _one_line_error(done, "ro.md: the note is read-only; nothing was written")
    assert (vault / "ro.md").read_bytes() == NOTES["ro.md"]
    assert _states(db)["ro.md"] == "open"

    os.chmod(vault / "ro.md", 0o644)
    assert _toolwire("review", "--db", db, "-a", "ro.md=databases").returncode == 0
    assert b"tags: [databases]" in (vault / "ro.md").read_bytes()
    assert _states(db)["ro.md"] == "answered"
