"""Preservation rules of librarian edits (issue 15): front matter edited in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.librarian.notes.changes import ChangeRejected, render_change
from toolwire.librarian.notes.workspace import Workspace

pytestmark = pytest.mark.unit

TAXONOMY = ("databases", "finance", "cooking", "reading")

NOTE = """---
# my own comment, kept
title: "Why index funds"   # quoted, with a trailing comment
tags: [finance, investing]
topic: finance
created: 2024-01-05
extra:
  - a
  - b
---
# Why index funds

Body.
"""


def _op(kind: str, body: str = "-", title: str = "Why index funds") -> Operation:
    return Operation("op_1", kind, "n", None, title, body, "r", 0.9)


def _edit(tmp_path: Path, text: str, op: Operation) -> str:
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    change = render_change(Workspace.load(tmp_path), op, TAXONOMY)
    assert change is not None
    return change.new.decode("utf-8")


def test_retag_replaces_only_taxonomy_tags_and_keeps_everything_else(tmp_path: Path) -> None:
    out = _edit(tmp_path, NOTE, _op("retag_note", "cooking"))
    expected = NOTE.replace("tags: [finance, investing]", "tags: [cooking, investing]").replace(
        "topic: finance", "topic: cooking"
    )
    assert out == expected  # comments, quoting, flow list, key order, nested list: all kept


def test_retag_keeps_block_list_style_and_user_tags(tmp_path: Path) -> None:
    text = "---\ntags:\n  - reading   # the user's\n  - later\ntopic: reading\n---\nBody.\n"
    out = _edit(tmp_path, text, _op("retag_note", "databases"))
    lines = out.splitlines()
    assert lines[:2] == ["---", "tags:"]
    assert lines[2].startswith("  - databases") and lines[2].endswith("# the user's")
    assert lines[3:] == ["  - later", "topic: databases", "---", "Body."]


def test_retag_of_comma_string_tags_keeps_the_string_form(tmp_path: Path) -> None:
    text = "---\ntags: networking, dns\ntopic: finance\n---\nBody.\n"
    out = _edit(tmp_path, text, _op("retag_note", "databases"))
    assert "tags: networking, dns" not in out
    assert "topic: databases" in out
    # finance was the topic: replaced; networking is not in this taxonomy: a user tag
    assert "tags: networking, dns, databases" in out or "tags: databases, networking, dns" in out


def test_retitle_changes_only_the_title_line(tmp_path: Path) -> None:
    out = _edit(tmp_path, NOTE, _op("retitle_note", title="Index funds, briefly"))
    before, after = NOTE.splitlines(), out.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert [before[i] for i in changed] == [
        'title: "Why index funds"   # quoted, with a trailing comment',
        "# Why index funds",
    ]
    # only the value's characters change: quoting, spacing and the comment stay
    assert after[2] == 'title: "Index funds, briefly"   # quoted, with a trailing comment'


def test_relink_that_flattens_the_body_is_refused(tmp_path: Path) -> None:
    text = "# T\n\n```\ncode  block\n```\n\n- a\n- b\n\nSee [x](a.md).\n"
    flat = " ".join(text.split()).replace("(a.md)", "(b.md)")
    with pytest.raises(ChangeRejected) as err:
        _edit(tmp_path, text, _op("relink_note", flat, title="T"))
    assert err.value.code == "RELINK_CHANGES_TEXT"
    ok = _edit(tmp_path, text, _op("relink_note", text.replace("(a.md)", "(b.md)"), title="T"))
    assert ok == text.replace("(a.md)", "(b.md)")
