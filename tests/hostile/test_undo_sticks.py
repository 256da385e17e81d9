"""Issue 45 items 2-4 and 15: an undo (or "leave it") that reported success sticks.

Undo restored the notes, marked its journal ``undone`` and only then told the store
"not this", per note; a kill in that window (20 of 24 kills), or a run started beside
the undo, re-applied the undone change, and a retried undo said "already undone". The
"not this" was keyed by the vault's absolute path (``mv notes notes-2024`` forgot it)
and by bytes alone (a copy of the note elsewhere was silenced too). Now a run reads the
undo from the vault's own journal (written before any note is restored), a retried
undo finishes the store's side from it, and answers hold for a note's path in the
vault and its bytes.

Real processes, the bundled scorer; the kill is the state it leaves: the journal says
``undone`` (``undo_run``, the journal's side of ``toolwire undo``) and the store holds
nothing of the undo.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hostile.review_vault import NOTES, digests, last_run, ok, sql, write_spec, write_vault
from hostile.tally import Tally
from toolwire.librarian.journal.write_ahead import undo_run

AREA = "issue 45 #2-4, #15: undo and leave it stick"


def _run(spec: Path, vault: Path, db: Path) -> str:
    ok("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    return last_run(db)


def _applied(db: Path, run_id: str) -> list[str]:
    rows = sql(db, f"SELECT path FROM operations WHERE run_id = '{run_id}' AND status = 'applied'")
    return sorted(r["path"] for r in rows)


def test_an_undo_killed_before_the_store_heard_of_it_sticks(tmp_path: Path, tally: Tally) -> None:
    vault, db = write_vault(tmp_path / "vault"), tmp_path / "s.duckdb"
    spec = write_spec(tmp_path, min_confidence=0.0)
    original = digests(vault)
    first = _run(spec, vault, db)
    assert _applied(db, first) == sorted(NOTES)
    assert undo_run(vault, first) == sorted(NOTES)  # killed here: the store knows nothing
    tally.add(AREA, "faults injected")
    tally.add(AREA, "inputs tried")

    again = _run(spec, vault, db)  # the nightly run (or one started beside the undo)
    assert digests(vault) == original, "a run re-applied an undone change"
    assert _applied(db, again) == []
    tally.add(AREA, "notes re-applied", 0)

    retried = ok("undo", first, "--workspace", vault, "--db", db)  # finishes, not refused
    assert "undone before" in retried.stderr
    assert sql(db, f"SELECT DISTINCT status FROM operations WHERE run_id = '{first}'") == [
        {"status": "undone"}
    ]
    tally.add(AREA, "runs recovered")


def test_undo_and_leave_it_move_with_the_vault(tmp_path: Path, tally: Tally) -> None:
    vault, db = write_vault(tmp_path / "notes"), tmp_path / "s.duckdb"
    asking, deciding = tmp_path / "ask", tmp_path / "decide"
    asking.mkdir()
    deciding.mkdir()
    original = digests(vault)
    _run(write_spec(asking), vault, db)  # every note a question
    ok("review", "--db", db, "--workspace", vault, "-a", "lisbon.md=-")  # leave it
    spec = write_spec(deciding, min_confidence=0.0)
    first = _run(spec, vault, db)
    assert _applied(db, first) == ["bread.md", "scratch.md"]
    ok("undo", first, "--workspace", vault, "--db", db)
    assert digests(vault) == original

    moved = vault.rename(tmp_path / "notes-2024")  # mv notes notes-2024
    tally.add(AREA, "inputs tried")
    again = _run(spec, moved, db)
    assert digests(moved) == original, "the moved vault got the undone change back"
    assert _applied(db, again) == []
    tally.add(AREA, "notes re-applied", 0)


def test_not_this_holds_for_the_note_not_a_copy_of_it(tmp_path: Path, tally: Tally) -> None:
    vault, db = write_vault(tmp_path / "vault"), tmp_path / "s.duckdb"
    spec = write_spec(tmp_path, min_confidence=0.0)
    first = _run(spec, vault, db)
    ok("undo", first, "--workspace", vault, "--db", db)
    (vault / "trips").mkdir()
    shutil.copy(vault / "lisbon.md", vault / "trips" / "lisbon.md")  # the same bytes
    tally.add(AREA, "inputs tried")

    again = _run(spec, vault, db)
    assert _applied(db, again) == ["trips/lisbon.md"], "a copy was silenced with its original"
    assert (vault / "lisbon.md").read_text(encoding="utf-8") == NOTES["lisbon.md"]
