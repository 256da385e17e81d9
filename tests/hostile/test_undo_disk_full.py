"""Issue 45 item 12: undo on a full disk ends with a code and says what it could not write.

It printed a bare ``No space left on device``: no code, no file, nothing on what state
the notes were left in. The vault lives on a real 2 MB tmpfs; the run's change is
applied, the disk is filled to the last byte, and ``toolwire undo`` (a process) must
fail in one line with ``WORKSPACE_ERROR`` naming what it was writing, lose nothing
(every note its old or new text), and undo once space frees.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hostile.review_vault import last_run, toolwire
from hostile.tally import Tally
from hostile.test_faults import fill_to, small_disk
from hostile.test_issue30_03_alias_bombs import write_spec, write_vault

AREA = "issue 45 #12: undo on a full disk"
NOTES = {
    "alpha.md": "# Alpha\n\nPostgres indexes and query plans.\n",
    "beta.md": "# Beta\n\nSourdough bread.\n",
}
RETAG = "".join(
    f"<operation>\n<operation_id>op_{i}</operation_id>\n<kind>retag_note</kind>\n"
    f"<target_note_id>{name}</target_note_id>\n<title>-</title>\n"
    "<body_markdown>databases</body_markdown>\n<reason>r</reason>\n"
    "<confidence>0.9</confidence>\n</operation>\n"
    for i, name in enumerate(("alpha", "beta"), start=1)
)


def _digests(root: Path) -> dict[str, str]:
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in NOTES}


def test_undo_on_a_full_disk_fails_with_a_code_and_loses_nothing(
    tmp_path: Path, tally: Tally
) -> None:
    with small_disk(tmp_path / "disk", "2m", tally, AREA) as disk:
        vault = write_vault(disk / "vault", NOTES)
        db = tmp_path / "s.duckdb"
        old = _digests(vault)
        ran = toolwire("run", write_spec(tmp_path, RETAG), "--workspace", vault, "--db", db,
                       "--no-prefect")  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-2000:]
        new = _digests(vault)
        assert new != old
        run_id = last_run(db)
        filler = fill_to(disk, 0)
        tally.add(AREA, "faults injected")

        undone = toolwire("undo", run_id, "--workspace", vault, "--db", db)
        lines = undone.stderr.strip().splitlines()
        assert undone.returncode != 0 and "Traceback" not in undone.stderr, undone.stderr
        assert len(lines) == 1 and lines[0].startswith("error: WORKSPACE_ERROR: "), lines
        assert "no space left" in lines[0] and ".toolwire" in lines[0], lines[0]
        now = _digests(vault)
        assert all(now[rel] in (old[rel], new[rel]) for rel in NOTES)
        tally.add(AREA, "rejected with a code")
        tally.add(AREA, "rows lost", 0)

        filler.unlink()  # space frees: the same undo goes through
        again = toolwire("undo", run_id, "--workspace", vault, "--db", db)
        assert again.returncode == 0, again.stderr
        assert _digests(vault) == old
        tally.add(AREA, "runs recovered")
