"""Issue 45 items 5 and 6: tags are read, and retagged, only in a note's prose.

``#tags`` inside HTML comments, indented code, ``<pre>`` blocks or a fence an
over-indented line did not close were read as tags, and a retag rewrote the text
inside the code or comment; a run of 3,000 backticks hung ``parse_note`` (the inline
code pattern backtracked ~n^3.5). Each vector of ``tags_in_code.yaml`` is checked
three ways: the tags read, the same tags in the prose markdown-it-py (a CommonMark
parser) finds, and a real retag of the note leaving every byte outside prose as it was.
The hang is run in a child with a time bound, so the old code fails instead of hanging.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from hostile.tally import Tally
from toolwire.domain import Operation
from toolwire.librarian.notes.changes import render_changes
from toolwire.librarian.notes.prose import prose_spans
from toolwire.librarian.notes.tags import inline_tags
from toolwire.librarian.notes.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
CASES = yaml.safe_load((REPO / "tests/data/hostile/notes/tags_in_code.yaml").read_text("utf-8"))
AREA = "issue 45 #5-6: tags only in prose"
_TAG = re.compile(r"(?<!\S)#([\w/-]+)")


def _commonmark_tags(text: str) -> list[str]:
    """The tags in the text nodes a CommonMark parser makes (no code, no raw HTML)."""
    found: list[str] = []
    for token in MarkdownIt("commonmark").parse(text):
        for child in token.children or []:
            if child.type == "text":
                found += [t.rstrip("/") for t in _TAG.findall(child.content)]
    return found


@pytest.mark.parametrize("name", sorted(CASES["cases"]))
def test_tags_are_read_only_from_prose(name: str, tmp_path: Path, tally: Tally) -> None:
    case = CASES["cases"][name]
    text, wanted = case["text"], case["tags"]
    tally.add(AREA, "inputs tried")
    assert inline_tags(text) == wanted
    assert _commonmark_tags(text) == wanted  # the vector itself is right

    # A retag of the note to "travel" rewrites prose tags only.
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    ws = Workspace.load(tmp_path)
    op = Operation("op_1", "retag_note", "n", None, "-", "travel", "r", 0.9)
    changes = render_changes(ws, [op], ["baking", "cooking", "roasting", "travel"])
    new = changes[0].new.decode("utf-8") if changes else text
    body = new.split("---\n", 2)[-1] if new.startswith("---\n") else new
    kept = [text[a:b] for a, b in _outside(text)]
    for piece in kept:
        assert piece in body, f"code or a comment was rewritten: {piece!r}"
    tally.add(AREA, "code or comments rewritten", 0)


def _outside(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for a, b in prose_spans(text):
        spans.append((pos, a))
        pos = b
    spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if b > a]


# Inline (a first character that opens no block): a line of 3+ backticks alone is a fence.
HANGS = {
    "3,000 backticks": "x " + "`" * 3000 + "\n",
    "backticks and letters": "a`" * 20_000 + "\n",
    "growing runs": "x " + " ".join("`" * n for n in range(1, 400)) + "\n",
    "comment openers": "x " + "<!--" * 50_000 + "\n",
    "tag openers": "x " + "<a " * 50_000 + "\n",
}


def test_backtick_runs_cannot_hang_parse_note(tmp_path: Path, tally: Tally) -> None:
    """Every shape parsed in one child with a time bound (the old code took hours)."""
    for i, text in enumerate(HANGS.values()):
        (tmp_path / f"{i}.md").write_text(text + "\n#baking\n", encoding="utf-8")
    tally.add(AREA, "inputs tried", len(HANGS))
    code = (
        "import sys, time; from pathlib import Path\n"
        "from toolwire.librarian.notes.workspace import parse_note\n"
        "for p in sorted(Path(sys.argv[1]).glob('*.md'), key=lambda p: int(p.stem)):\n"
        "    t = time.monotonic(); note, _ = parse_note(p.name, p.read_bytes())\n"
        "    print(f'{time.monotonic() - t:.3f}', ','.join(note.tags), flush=True)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired as exc:
        tally.add(AREA, "hung", 1)
        pytest.fail(f"parse_note ran over 60 s; finished: {exc.stdout!r}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name, line in zip(HANGS, lines, strict=True):
        seconds, tags = line.split(" ", 1)
        tally.note(AREA, f"{name}: parse_note {seconds} s")
        assert tags == "baking", name
    tally.add(AREA, "hung", 0)
