"""Issue 30 item 2: front matter edits never write through YAML anchors, aliases or merge
keys, and keep the user's comments (inside a flow list, in a comment-only block).

Before, a retag of ``tags: &t [...]`` also rewrote ``other: *t``, a retag through
``<<: *b`` rewrote the user's ``_base`` mapping, and a retitle deleted a comment
inside a flow ``tags:`` list and the comment of a comment-only block. Now a block
with an anchor, alias or merge key is not edited at all (``FRONT_MATTER_ALIAS``,
the file stays as it was), and edits splice only the changed values into the text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hostile.tally import Tally
from toolwire.domain import Operation
from toolwire.librarian.notes.changes import ChangeRejected, render_change
from toolwire.librarian.notes.workspace import Workspace
from toolwire.spec.model import NoteConventions, NotesSpec

AREA = "issue 30: front matter edits"
TAXONOMY = ("finance", "cooking", "databases")
# Edits in a vault that keeps a title and a topic property, stated as a spec states it
# (issue 42: a one-note vault says little about its conventions).
TOOLWIRE_STYLE = NotesSpec(
    conventions=NoteConventions(title="property", topic_property=True, list_style="flow")
)

THROUGH_ALIASES = {
    "anchored-tags": "tags: &t [finance, investing]\nother: *t\n",
    "merged-base": "_base: &b\n  tags: [finance]\n  title: Base\n<<: *b\n",
    "merged-nested": "defaults: &d {topic: finance}\nnote:\n  <<: *d\ntopic: finance\n",
    "anchored-title": "title: &t Old\nalias_of_title: *t\ntags: [finance]\n",
    "anchor-only": "tags: &t [finance]\n",
}


def _op(kind: str, body: str = "-", title: str = "A new title") -> Operation:
    return Operation("op_1", kind, "n", None, title, body, "r", 0.9)


def _change(tmp_path: Path, text: str, op: Operation) -> str:
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    change = render_change(Workspace.load(tmp_path, TOOLWIRE_STYLE), op, TAXONOMY)
    assert change is not None
    return change.new.decode("utf-8")


@pytest.mark.parametrize("name", sorted(THROUGH_ALIASES))
@pytest.mark.parametrize("kind", ["retag_note", "retitle_note"])
def test_no_edit_through_an_anchor_alias_or_merge_key(
    tmp_path: Path, tally: Tally, name: str, kind: str
) -> None:
    tally.add(AREA, "inputs tried")
    text = f"---\n{THROUGH_ALIASES[name]}---\nBody.\n"
    with pytest.raises(ChangeRejected) as err:
        _change(tmp_path, text, _op(kind, "cooking"))
    assert err.value.code == "FRONT_MATTER_ALIAS"
    assert (tmp_path / "n.md").read_text(encoding="utf-8") == text
    tally.add(AREA, "refused with a code")


KEEP_COMMENTS = [
    # (front matter, operation, the lines that must survive verbatim)
    ("tags: [finance, # why I filed it\n  investing]\ntitle: Old\n", _op("retitle_note"), 1),
    ("tags: [investing, # why I filed it\n  finance]\n", _op("retag_note", "cooking"), 1),
    ("# a block holding only this comment\n", _op("retitle_note"), 1),
    ("# one\n\n# two, after a blank line\n", _op("retag_note", "cooking"), 2),
    ("tags:\n  - finance   # first\n  - investing # second\n", _op("retag_note", "cooking"), 2),
]


@pytest.mark.parametrize(("block", "op", "kept"), KEEP_COMMENTS)
def test_comments_stay_where_the_user_wrote_them(
    tmp_path: Path, tally: Tally, block: str, op: Operation, kept: int
) -> None:
    tally.add(AREA, "inputs tried")
    out = _change(tmp_path, f"---\n{block}---\nBody.\n", op)
    comments = [line[line.index("#") :] for line in block.splitlines() if "#" in line]
    out_comments = [line[line.index("#") :] for line in out.splitlines() if "#" in line]
    assert len(comments) == kept and comments == [c for c in out_comments if c in comments]
    data = yaml.safe_load(out.split("---\n")[1])
    if op.kind == "retitle_note":
        assert data["title"] == "A new title"
    else:
        assert data["topic"] == "cooking" and "cooking" in data["tags"]
        assert ("investing" in data["tags"]) == ("investing" in block)
