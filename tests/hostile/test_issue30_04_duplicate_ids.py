"""Issue 30 item 4: a front matter ``id`` another note already has cannot stop a run.

Before, one note saying ``id: alpha`` beside ``alpha.md`` failed every run with
``WORKSPACE_ERROR: duplicate note ids``. Now path ids are claimed first; a note
whose chosen ``id`` is taken is read under its path id (a warning says so), or
skipped when that is taken too. Ids stay unambiguous: an operation on ``alpha``
changes ``alpha.md`` and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

from hostile.tally import Tally
from hostile.test_issue30_03_alias_bombs import run_cli, write_spec, write_vault

AREA = "issue 30: duplicate note ids"

NOTES = {
    "alpha.md": "---\ntags: [cooking]\n---\n# Alpha\n\nPostgres indexes and query plans.\n",
    "copy.md": "---\nid: alpha\n---\n# A copy claiming alpha\n\nBread.\n",
    "sub/other.md": "---\nid: alpha\n---\n# Another claim\n\nTrains.\n",
    "0-first.md": "---\nid: sub/late\n---\nClaims the path id of sub/late.md.\n",
    "sub/late.md": "---\nid: alpha\n---\nIts id and its path id are both taken.\n",
}

RETAG_ALPHA = (
    "<operation>\n<operation_id>op_1</operation_id>\n<kind>retag_note</kind>\n"
    "<target_note_id>alpha</target_note_id>\n<title>Alpha</title>\n"
    "<body_markdown>databases</body_markdown>\n<reason>indexes</reason>\n"
    "<confidence>0.9</confidence>\n</operation>\n"
)


def test_a_clashing_front_matter_id_is_a_warning_not_a_failed_run(
    tmp_path: Path, tally: Tally
) -> None:
    vault = write_vault(tmp_path / "vault", NOTES)
    before = {rel: (vault / rel).read_bytes() for rel in NOTES}
    tally.add(AREA, "inputs tried", 4)  # four notes whose id clashes
    db = tmp_path / "s.duckdb"
    spec = write_spec(tmp_path, RETAG_ALPHA)
    ran = run_cli("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "duplicate note ids" not in ran.stderr
    assert "copy.md: its front matter id 'alpha' is already used by alpha.md" in ran.stderr
    assert "skipped sub/late.md" in ran.stderr
    status = run_cli("sql", "--db", db, "--format", "json", "SELECT status FROM runs")
    assert json.loads(status.stdout) == [{"status": "ok"}]
    after = {rel: (vault / rel).read_bytes() for rel in NOTES}
    assert [rel for rel in NOTES if after[rel] != before[rel]] == ["alpha.md"]
    assert b"databases" in after["alpha.md"]
    tally.add(AREA, "runs failed", 0)
