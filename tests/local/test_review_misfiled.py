"""A wrong topic the user gave, end to end, as processes (issue 28): the run keeps it
(a librarian never replaces a user's topic on its own), says so in its summary, and
asks about it; the user's answer through `toolwire review --answer` fixes the note,
and the next run neither changes it nor asks again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_review_loop import NOTES, _questions, _write_spec, toolwire

pytestmark = pytest.mark.local

WRONG = "zz/tls-renewal.md"  # about TLS certificates, filed under travel by mistake
WRONG_TEXT = (
    "---\ntitle: TLS certificate renewal\ntags: [travel, howto]  # filed in a hurry\n---\n"
    "Renew the TLS certificates with certbot before they expire; check the chain with\n"
    "openssl s_client and rotate the private keys and SSH host keys every year.\n"
)


def _vault(tmp: Path) -> Path:
    root = tmp / "vault"
    for rel, text in {**NOTES, WRONG: WRONG_TEXT}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_wrong_user_topic_is_kept_flagged_asked_and_fixed_by_the_answer(
    tmp_path: Path,
) -> None:
    vault, spec, db = _vault(tmp_path), _write_spec(tmp_path), tmp_path / "s.duckdb"
    ran = toolwire("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    assert (vault / WRONG).read_text(encoding="utf-8") == WRONG_TEXT  # kept, byte for byte
    # The summary counts it (never silent), naming the note and the scorer's best topic.
    (line,) = [ln for ln in ran.stderr.splitlines() if "rates far below another" in ln]
    assert f"{WRONG} (travel -> security" in line and "toolwire review" in line

    listed = {q["path"]: q for q in _questions(db)["questions"]}
    assert listed[WRONG]["kind"] == "misfiled" and listed[WRONG]["state"] == "open"

    answered = toolwire("review", "--db", db, "-a", f"{WRONG}=security")
    assert answered.returncode == 0, answered.stderr
    fixed = (vault / WRONG).read_text(encoding="utf-8")
    assert "tags: [security, howto]  # filed in a hurry\n" in fixed

    again = toolwire("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert again.returncode == 0, again.stderr
    assert (vault / WRONG).read_text(encoding="utf-8") == fixed
    assert "rates far below another" not in again.stderr
    assert WRONG not in {q["path"] for q in _questions(db)["questions"]}
