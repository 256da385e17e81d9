"""How a vault writes a note's title and topics, read from its notes (issue 42).

Obsidian's own help vault titles every note by its file name, tags in front matter
with block lists and has no ``topic:`` property; a folder kept by toolwire's older
runs has ``title:`` and ``topic:`` on most notes. A librarian that writes one way
everywhere adds properties a vault never used (172 ``title:`` lines made from first
sentences, a ``topic:`` beside every tag). So before writing, the vault is read:

- title: a ``title:`` property on at least half the notes, else a leading ``# H1``
  on at least half, else the file name (which toolwire never renames);
- topics: ``topic:`` written when at least half the tagged notes carry one; tags in
  front matter unless more notes tag only inline (then inline ``#tags``); none when
  the vault keeps topics in ``topic:`` alone;
- list style: how the vault writes ``tags`` (block, flow or string), else how it
  writes its other lists (``aliases``, ``cssclasses``), else a flow list.

A spec may state any of these (``notes.conventions``); what it states wins.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from toolwire.spec.model import NoteConventions

__all__ = ["Conventions", "NoteSample", "detect_conventions", "describe_conventions"]

TitleWay = Literal["file_name", "h1", "property"]
TagsWay = Literal["front_matter", "inline", "none"]
ListStyle = Literal["block", "flow", "string"]

# A key and what follows it on its line, at the block's top level.
_KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*)$")
_BLOCK_ITEM = re.compile(r"^[ \t]*-[ \t]")
_H1 = re.compile(r"^ {0,3}#[ \t]+\S")


@dataclass(frozen=True, slots=True)
class Conventions:
    """The vault's ways: where a title lives, where a topic goes, a new list's form."""

    title: TitleWay = "file_name"
    tags: TagsWay = "front_matter"
    topic_property: bool = False
    list_style: ListStyle = "flow"

    def stated(self, spec: NoteConventions | None) -> Conventions:
        """These conventions with what a spec states put over them."""
        if spec is None:
            return self
        given = {k: v for k, v in spec.model_dump().items() if v is not None}
        return replace(self, **given)


@dataclass(frozen=True, slots=True)
class NoteSample:
    """What detection needs of one note: its front matter values and block, its body."""

    front_matter: dict[str, Any]
    block: str  # the front matter text between the --- lines ("" when none)
    body: str
    inline_tags: tuple[str, ...]


def _list_styles(block: str) -> dict[str, str]:
    """The style of each top-level key's value in ``block``: block, flow or scalar."""
    styles: dict[str, str] = {}
    lines = block.splitlines()
    for i, line in enumerate(lines):
        m = _KEY_LINE.match(line)
        if not m:
            continue
        value = m.group(2).split(" #", 1)[0].strip()
        if value.startswith("["):
            styles[m.group(1)] = "flow"
        elif value:
            styles[m.group(1)] = "scalar"
        else:
            rest = (x for x in lines[i + 1 :] if x.strip() and not x.lstrip().startswith("#"))
            after = next(rest, "")
            styles[m.group(1)] = "block" if _BLOCK_ITEM.match(after) else "empty"
    return styles


def _leading_h1(body: str) -> bool:
    first = next((line for line in body.splitlines() if line.strip()), "")
    return bool(_H1.match(first))


def _majority(counts: Counter[str], default: ListStyle) -> ListStyle:
    if not counts:
        return default
    best = max(counts.values())
    # Ties go to the block list (what Obsidian's property editor writes).
    for style in ("block", "flow", "string"):
        if counts.get(style) == best:
            return style
    return default


def detect_conventions(notes: Iterable[NoteSample]) -> Conventions:
    """The conventions most of ``notes`` follow (module docstring); defaults for none."""
    total = titled = headed = tagged = with_topic = fm_tagged = inline_only = 0
    tag_styles: Counter[str] = Counter()
    list_styles: Counter[str] = Counter()
    for note in notes:
        total += 1
        data = note.front_matter
        titled += isinstance(data.get("title"), str) and bool(data["title"].strip())
        headed += _leading_h1(note.body)
        styles = _list_styles(note.block)
        has_tags = bool(data.get("tags"))
        has_topic = isinstance(data.get("topic"), str) and bool(data["topic"].strip())
        fm_tagged += has_tags
        inline_only += not has_tags and bool(note.inline_tags)
        if has_tags or has_topic or note.inline_tags:
            tagged += 1
            with_topic += has_topic
        if has_tags and "tags" in styles:
            kind = styles["tags"]
            tag_styles["string" if kind == "scalar" else kind] += 1
        for key, kind in styles.items():
            if key != "tags" and kind in ("block", "flow"):
                list_styles[kind] += 1
    title: TitleWay = "file_name"
    if total and titled * 2 >= total:
        title = "property"
    elif total and headed * 2 >= total:
        title = "h1"
    topic_property = bool(tagged) and with_topic * 2 >= tagged
    tags: TagsWay = "front_matter"
    if inline_only > fm_tagged:
        tags = "inline"
    elif topic_property and not fm_tagged and not inline_only:
        tags = "none"
    style = _majority(tag_styles, _majority(list_styles, "flow"))
    return Conventions(title, tags, topic_property, style)


def describe_conventions(conv: Conventions) -> str:
    """One line for the run's plan: what toolwire will write, in words."""
    title = {
        "file_name": "titles are file names (no title written)",
        "h1": "titles are the first '# heading'",
        "property": "titles are a 'title:' property",
    }[conv.title]
    where = {
        "front_matter": f"topics as front matter tags ({conv.list_style} list)"
        if conv.list_style != "string"
        else "topics as front matter tags (a string)",
        "inline": "topics as inline #tags",
        "none": "topics not as tags",
    }[conv.tags]
    topic = ", plus a 'topic:' property" if conv.topic_property else ", no 'topic:' property"
    return f"{title}; {where}{topic}"
