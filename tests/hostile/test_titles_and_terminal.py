"""Issue 45 items 7, 8, 11, 13 and 14: a title cannot hang a run, carry escapes, or
crash the summary; whatever a note holds is printed as text.

A derived title read its first line with patterns that were cubic on ``## a``, 8,000
spaces, ``b`` (~7 min) and quadratic on 100,000 ``[[``; escape sequences in a first
sentence became the title (written, stored, printed raw: the screen cleared, an OSC 8
link planted); Rich markup in a path or title crashed the run summary (``MarkupError``,
exit 1 for a run stored ``ok``); the review prompt printed a note's escapes raw.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from hostile.review_vault import ok, sql, toolwire, write_spec, write_vault
from hostile.tally import Tally
from toolwire.cli.review_cmds import _show
from toolwire.librarian.answer import derive_title
from toolwire.librarian.notes.changes import ChangeRejected, check_title
from toolwire.librarian.notes.workspace import Workspace
from toolwire.store.review import QuestionRow

AREA = "issue 45 #7-8, #11, #13-14: titles and the terminal"
ESC = "\x1b"

HANGS = {
    "heading, 8,000 spaces": "## a" + " " * 8000 + "b\n",
    "heading, 100,000 spaces and hashes": "# a" + " #" * 50_000 + " x\n",
    "100,000 [[": "[[" * 100_000 + "\n",
    "100,000 [[ after a word": "Notes " + "[[" * 100_000 + "\n",
    "links never closed": "See " + "[a](" * 50_000 + "\n",
    "wiki pipes": "x " + "[[a|" * 50_000 + "\n",
}

ESCAPES = {
    "clear screen": "Fix \x1b[2J\x1b[H the oven later. More.",
    "osc 8 link": "Read \x1b]8;;https://evil.invalid\x07the manual\x1b]8;;\x07 first. More.",
    "osc with st": "Read \x1b]0;owned\x1b\\ the manual first. More.",
    "c1 csi": "Fix \x9b2J the oven later. More.",
    "bell and backspace": "Bake\x07 bread\x08\x08 today. More.",
    "bidi override": "Invoice \u202egpj.exe today. More.",
}


def test_derived_titles_are_linear(tmp_path: Path, tally: Tally) -> None:
    """All shapes in one child with a time bound: the old patterns took minutes to hours."""
    (tmp_path / "shapes.json").write_text(json.dumps(list(HANGS.values())), encoding="utf-8")
    tally.add(AREA, "inputs tried", len(HANGS))
    code = (
        "import json, sys, time; from toolwire.librarian.answer import derive_title\n"
        "for text in json.load(open(sys.argv[1])):\n"
        "    t = time.monotonic(); derive_title(text); print(f'{time.monotonic() - t:.3f}')\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "shapes.json")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        tally.add(AREA, "hung", 1)
        pytest.fail(f"derive_title ran over 60 s; finished: {exc.stdout!r}")
    assert done.returncode == 0, done.stderr
    for name, seconds in zip(HANGS, done.stdout.split(), strict=True):
        tally.note(AREA, f"derive_title, {name}: {seconds} s")
    tally.add(AREA, "hung", 0)


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_title_holds_no_control_character(name: str, tally: Tally) -> None:
    text = ESCAPES[name]
    tally.add(AREA, "inputs tried")
    title = derive_title(text + "\n")
    assert title and title.isprintable() and "\u202e" not in title, repr(title)
    with pytest.raises(ChangeRejected) as refused:  # a model's (or anyone's) title
        check_title(text.split(".")[0], required=True)
    assert refused.value.code == "INVALID_TITLE"
    tally.add(AREA, "rejected with a code")


NOTES = {
    "esc.md": "Fix \x1b[2J\x1b]8;;http://evil.invalid\x07the oven\x1b]8;;\x07 later [/bold] "
    "today. Sourdough bread needs a hot oven.\n",
    "x[/b]y.md": "Hello [bold red]ALERT[/bold red] about sourdough baking and bread.\n",
}


def test_markup_and_escapes_are_printed_as_text(tmp_path: Path, tally: Tally) -> None:
    vault, db = write_vault(tmp_path / "vault", NOTES), tmp_path / "s.duckdb"
    spec = write_spec(tmp_path, min_confidence=0.0, titles=True)
    tally.add(AREA, "inputs tried", len(NOTES))
    ran = toolwire("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert "Traceback" not in ran.stderr and "MarkupError" not in ran.stderr, ran.stderr[-2000:]
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sql(db, "SELECT status FROM runs") == [{"status": "ok"}]
    assert "x[/b]y.md" in ran.stderr  # a path with markup, printed as written
    assert ESC not in ran.stdout + ran.stderr, "an escape reached the terminal"
    # Whether titles are written is the vault's convention; any written is plain text.
    titles = sql(db, "SELECT new_value FROM note_changes WHERE field = 'title'")
    assert all(t["new_value"].isprintable() for t in titles), titles
    for rel in NOTES:
        text = (vault / rel).read_text(encoding="utf-8")
        front = text.split("---\n")[1] if text.startswith("---\n") else ""
        assert ESC not in front
    shown = ok("show", sql(db, "SELECT run_id FROM runs")[0]["run_id"], "--db", db)
    assert ESC not in shown.stdout + shown.stderr
    tally.add(AREA, "escapes printed", 0)


def test_the_review_prompt_shows_control_characters_escaped(tmp_path: Path, tally: Tally) -> None:
    note = "# Oven \x1b[2J\n\nLine \x1b]8;;https://evil.invalid\x07link\x1b]8;;\x07 \u202eexe\n"
    (tmp_path / "n.md").write_text(note, encoding="utf-8")
    ws = Workspace.load(tmp_path)
    path = next(iter(ws.notes.values())).path
    question = QuestionRow(
        path, "n", "0" * 64, "deferred", None,
        ({"topic": "cooking", "confidence": 0.4, "evidence": "oven \x1b[2J words"},), "why",
    )  # fmt: skip
    out = io.StringIO()
    _show(Console(file=out, width=200, markup=False), ws, question, 1, 1)
    tally.add(AREA, "inputs tried")
    printed = out.getvalue()
    assert ESC not in printed and "\u202e" not in printed and "\x07" not in printed
    assert "\\x1b[2J" in printed and "\\u202e" in printed
    tally.add(AREA, "escapes printed", 0)
