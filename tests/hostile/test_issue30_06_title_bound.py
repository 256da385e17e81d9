"""Issue 30 item 6: a title is bounded wherever it is used.

A 198 KB first heading or a 30 KB front matter title once reached the topic
scorer whole (``render`` took 79 s instead of 18 s). A note's title is now one
line of at most 200 characters as read, so the scorer, the request and the
reports all get it bounded; the heading regex reads only a line's start (no
quadratic match on a long line of spaces); a retitle longer than that is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile.tally import Tally
from hostile.test_issue30_03_alias_bombs import write_spec, write_vault
from toolwire.librarian.job import build_requests, load_context
from toolwire.librarian.notes.changes import ChangeRejected, check_title
from toolwire.librarian.notes.workspace import Workspace

MAX_TITLE_CHARS = 200  # the bound README states for every title

AREA = "issue 30: long titles"

NOTES = {
    "heading.md": "# " + "word " * 40_000 + "\n\nBody.\n",
    "spaces.md": "# a" + " " * 100_000 + "b\n\nBody.\n",
    "fm-title.md": "---\ntitle: " + "x" * 30_000 + "\n---\nBody.\n",
    "block-title.md": "---\ntitle: |\n  " + "line\n  " * 5_000 + "\n---\nBody.\n",
    "tag-soup.md": "# " + "#tag " * 20_000 + "\n",
}


def test_titles_are_bounded_as_read_and_in_the_request(tmp_path: Path, tally: Tally) -> None:
    vault = write_vault(tmp_path / "vault", NOTES)
    tally.add(AREA, "inputs tried", len(NOTES))
    ws = Workspace.load(vault)
    assert ws.warnings == []
    for note in ws.notes.values():
        assert 0 < len(note.title) <= MAX_TITLE_CHARS and "\n" not in note.title, note.path
    ctx = load_context(write_spec(tmp_path), workspace=vault)
    requests = build_requests(ctx, ws)
    for tr in requests:
        for line in tr.request_xml.splitlines():
            if "<title>" in line:
                assert len(line) <= MAX_TITLE_CHARS + 40


def test_a_retitle_longer_than_the_bound_is_refused() -> None:
    assert check_title("t" * MAX_TITLE_CHARS, required=True)
    with pytest.raises(ChangeRejected) as err:
        check_title("t" * (MAX_TITLE_CHARS + 1), required=True)
    assert err.value.code == "INVALID_TITLE"
