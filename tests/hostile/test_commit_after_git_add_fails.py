"""Issue 45 item 17: ``--commit`` whose ``git add`` fails says the notes changed.

With a stale ``.git/index.lock`` (a crashed editor's git, another git running), the
run wrote the notes, then ended ``WORKSPACE_ERROR: git add failed`` without saying the
notes had changed, and its operations stayed ``planned``. Now it ends
``GIT_COMMIT_REFUSED`` with what to do (the notes are changed but not committed), the
operations are stored ``applied``, and ``toolwire undo`` takes them back.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hostile.review_vault import last_run, sql, toolwire
from hostile.tally import Tally
from hostile.test_issue30_03_alias_bombs import write_spec, write_vault
from hostile.test_undo_disk_full import NOTES, RETAG, _digests

AREA = "issue 45 #17: --commit after git add fails"


def test_a_failed_git_add_is_reported_with_the_notes_applied(tmp_path: Path, tally: Tally) -> None:
    vault = write_vault(tmp_path / "vault", NOTES)
    git = ["git", "-C", str(vault), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "notes"], check=True)
    (vault / ".git" / "index.lock").write_text("")  # stale: a git that crashed
    old, db = _digests(vault), tmp_path / "s.duckdb"
    tally.add(AREA, "inputs tried")

    ran = toolwire("run", write_spec(tmp_path, RETAG), "--workspace", vault, "--db", db,
                   "--no-prefect", "--commit")  # fmt: skip
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    assert "GIT_COMMIT_REFUSED: git add failed" in ran.stderr, ran.stderr[-2000:]
    assert "notes are changed but not committed" in ran.stderr
    assert _digests(vault) != old  # written, as it says
    run_id = last_run(db)
    statuses = sql(db, f"SELECT DISTINCT status FROM operations WHERE run_id = '{run_id}'")
    assert statuses == [{"status": "applied"}], statuses
    assert sql(db, f"SELECT error_code FROM runs WHERE run_id = '{run_id}'") == [
        {"error_code": "GIT_COMMIT_REFUSED"}
    ]
    tally.add(AREA, "rejected with a code")

    (vault / ".git" / "index.lock").unlink()
    undone = toolwire("undo", run_id, "--workspace", vault, "--db", db)
    assert undone.returncode == 0, undone.stderr
    assert _digests(vault) == old
    tally.add(AREA, "runs recovered")
