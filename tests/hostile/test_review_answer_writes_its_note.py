"""Issue 45 item 1: a review answer writes the note the question named, and no other.

``toolwire review --answer z.md=cooking`` after the user copied ``z.md`` (front matter
``id: zed``) to ``a.md`` retagged **a.md** (the copy sorts first and claims the id) and
then exited 1 after the write. The answer now names its note by path, and the change is
checked to be that note's before anything is stored or written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hostile.review_vault import digests, ok, sql, toolwire, write_spec, write_vault
from hostile.tally import Tally

AREA = "issue 45 #1: review answer on a duplicated note"
ZED = "---\nid: zed\n---\nSourdough: feed the starter, 75% hydration, bake at 250 C.\n"


def test_an_answer_retags_the_named_note_not_a_copy_claiming_its_id(
    tmp_path: Path, tally: Tally
) -> None:
    vault = write_vault(tmp_path / "vault", {"z.md": ZED})
    db = tmp_path / "s.duckdb"
    ok("run", write_spec(tmp_path), "--workspace", vault, "--db", db, "--no-prefect")
    shutil.copy(vault / "z.md", vault / "a.md")  # the user duplicates the note
    before = digests(vault)
    tally.add(AREA, "inputs tried")

    answered = toolwire("review", "--db", db, "--workspace", vault, "-a", "z.md=cooking")
    after = digests(vault)
    assert answered.returncode == 0, answered.stderr
    assert after["a.md"] == before["a.md"], "the copy was written"
    assert after["z.md"] != before["z.md"]
    assert "cooking" in (vault / "z.md").read_text(encoding="utf-8")
    assert sql(db, "SELECT path FROM operations WHERE status = 'applied'") == [{"path": "z.md"}]
    tally.add(AREA, "notes written by mistake", 0)
