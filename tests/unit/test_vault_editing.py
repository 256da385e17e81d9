"""Front matter edits on generated blocks: every form of tags, comments everywhere.

Whatever the block, an edit either refuses (FrontMatterEditError) or writes a
block that reads back with the asked values, every other key unchanged and
every comment line still there.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.librarian.notes.frontmatter_edit import (
    FrontMatterEditError,
    TagEdit,
    edit_block,
    topics_to_replace,
)
from toolwire.librarian.notes.frontmatter_load import load_front_matter
from toolwire.librarian.notes.tags import carries, front_matter_tags

pytestmark = pytest.mark.unit

TAXONOMY = ["finance", "cooking", "databases"]
TAGS = ["finance", "cooking", "Finance", "a/b", "cooking/bread", "x-y", "日本", "no", "it's"]


def _scalar(tag: str, style: int) -> str:
    if style == 0 and "'" not in tag:
        return tag
    if style == 1:
        return "'" + tag.replace("'", "''") + "'"
    return '"' + tag + '"'


@st.composite
def _tags_value(draw: Any) -> str:
    items = draw(st.lists(st.sampled_from(TAGS), max_size=4, unique=True))
    styles = [draw(st.integers(0, 2)) for _ in items]
    shown = [_scalar(t, s) for t, s in zip(items, styles, strict=True)]
    form = draw(st.sampled_from(["flow", "flow-comments", "block", "space", "comma", "empty"]))
    if form == "flow":
        return " [" + ", ".join(shown) + "]\n"
    if form == "flow-comments":
        return " [" + ",  # why\n  ".join(shown) + "]  # end\n"
    if form == "block" and items:
        indent = draw(st.sampled_from(["", "  "]))
        notes = [draw(st.sampled_from(["", "  # mine"])) for _ in shown]
        return "\n" + "".join(f"{indent}- {v}{n}\n" for v, n in zip(shown, notes, strict=True))
    if form == "space":
        return " " + " ".join(t for t in items if "'" not in t) + "\n"
    if form == "comma":
        return ' "' + ", ".join(items) + '"\n'
    return "\n"


@st.composite
def _block(draw: Any) -> str:
    keys = draw(st.lists(st.sampled_from(["title", "tags", "topic", "other", "#"]), unique=True))
    lines = []
    for key in keys:
        if key == "tags":
            lines.append("tags:" + draw(_tags_value()))
        elif key == "#":
            lines.append("# a comment line\n")
        elif key == "title":
            title = draw(st.sampled_from(["Old", "no", "'A: b'"]))
            lines.append(f"title: {title}  # t\n")
        elif key == "topic":
            lines.append(f"topic: {draw(st.sampled_from([*TAXONOMY, 'other']))}\n")
        else:
            lines.append("other: [1, yes, 2024-01-01]\n")
    return "".join(lines)


def _comments(text: str) -> list[str]:
    return [line.split("  # ", 1)[1] for line in text.splitlines() if "  # " in line] + [
        line for line in text.splitlines() if line.startswith("# ")
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inner=_block(), topics=st.lists(st.sampled_from(TAXONOMY), min_size=1, max_size=2))
def test_a_retag_reads_back_right_and_keeps_every_comment(inner: str, topics: list[str]) -> None:
    before = load_front_matter(inner) or {}
    edit = TagEdit(tuple(dict.fromkeys(topics)), topics_to_replace(TAXONOMY, before.get("topic")))
    try:
        out = edit_block(inner, retag=edit)
    except FrontMatterEditError:
        return
    after = load_front_matter(out) or {}
    tags = front_matter_tags(after.get("tags"))
    assert all(carries(tags, t) for t in edit.topics)
    left = {t.casefold() for t in tags if t.casefold() in TAXONOMY}  # exact, not nested
    assert left <= {t.casefold() for t in edit.topics}
    assert {k: v for k, v in after.items() if k not in ("tags", "topic")} == {
        k: v for k, v in before.items() if k not in ("tags", "topic")
    }
    for comment in _comments(inner):
        assert comment in out


@settings(max_examples=200, deadline=None)
@given(inner=_block(), title=st.sampled_from(["New", "no", "A: b", "it's", "#x", "[y]", "é"]))
def test_a_retitle_changes_the_title_and_nothing_else(inner: str, title: str) -> None:
    before = load_front_matter(inner) or {}
    out = edit_block(inner, set_values={"title": title})
    after = load_front_matter(out) or {}
    assert after == {**before, "title": title}
    for comment in _comments(inner):
        assert comment in out


def test_a_deleted_block_item_leaves_its_comment() -> None:
    inner = "tags:\n  - finance\n  - cooking  # from the old system\n  - x\n"
    out = edit_block(inner, retag=TagEdit(("databases",), frozenset(TAXONOMY)))
    assert out == "tags:\n  - databases\n  # from the old system\n  - x\ntopic: databases\n"


def test_adjacent_flow_items_go_without_touching_comments() -> None:
    inner = "tags: [x, finance,  # a\n  cooking,  # b\n  databases]  # c\n"
    out = edit_block(inner, retag=TagEdit(("cooking",), frozenset(TAXONOMY)))
    assert load_front_matter(out)["tags"] == ["x", "cooking"]
    assert all(c in out for c in ("# a", "# b", "# c"))
