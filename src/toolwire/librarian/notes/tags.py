"""A note's tags in every form its owner writes them (issue 28 item 3).

Obsidian-style vaults tag a note in front matter (``tags: [a, b]``, a block
list, ``tags: a, b`` or ``tags: a b`` as one string, ``#a`` written there in
quotes) and in the text (``#a`` inline). Tags nest: ``#cooking/bread`` is a
``cooking`` tag too (Obsidian's tag search finds it under ``#cooking``), and
tags are compared without regard to case, as Obsidian does.

Inline tags are read from prose only (:mod:`.prose`: never inside code, raw HTML or
comments), and a
``#`` must start a word (so ``# Heading``, ``[[note#heading]]``, ``(#anchor)``
and ``https://site/#part`` are not tags). A tag holds letters, digits, ``_``,
``-`` and ``/``, and at least one character that is not a digit (``#2024`` is
not a tag).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from toolwire.librarian.notes.prose import prose_spans

__all__ = [
    "carried_topic",
    "carries",
    "front_matter_tags",
    "inline_tag_spans",
    "inline_tags",
    "split_tag_string",
]

# A "#" at the start of a word, then tag characters (\w is Unicode: any script).
_INLINE_TAG = re.compile(r"(?<!\S)#([\w/-]+)")
_TAG_SEPARATORS = re.compile(r"[,\s]+")


def _clean(tag: str) -> str:
    return tag.strip().lstrip("#").strip().rstrip("/")


def _is_tag(tag: str) -> bool:
    return bool(tag) and not tag.replace("/", "").isdigit()


def split_tag_string(value: str) -> list[str]:
    """``"a, b"`` and ``"a b"`` alike: tags hold no spaces, so both separate tags."""
    return [t for t in (_clean(p) for p in _TAG_SEPARATORS.split(value)) if _is_tag(t)]


def front_matter_tags(value: Any) -> list[str]:
    """The tags a front matter ``tags`` value names: a string or a list of strings."""
    if isinstance(value, str):
        return split_tag_string(value)
    if isinstance(value, list):
        found: list[str] = []
        for item in value:
            if isinstance(item, str | int) and not isinstance(item, bool):
                found += split_tag_string(str(item))
        return found
    return []


def inline_tag_spans(body: str) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` of every inline tag in ``body``, code skipped;
    ``body[start:end]`` is ``#tag``."""
    spans: list[tuple[int, int, str]] = []
    if "#" not in body:
        return spans
    for start, end in prose_spans(body):
        for m in _INLINE_TAG.finditer(body, start, end):
            tag = m.group(1).rstrip("/")
            if _is_tag(tag):
                spans.append((m.start(), m.start() + 1 + len(tag), tag))
    return spans


def inline_tags(body: str) -> list[str]:
    """The inline ``#tags`` of ``body``, in order (without the ``#``)."""
    return [tag for _, _, tag in inline_tag_spans(body)]


def carries(tags: Iterable[str], topic: str) -> bool:
    """Whether a note with ``tags`` carries ``topic``: the tag itself or a tag nested
    under it (``cooking/bread`` carries ``cooking``), ignoring case."""
    key = topic.casefold()
    return any(t.casefold() == key or t.casefold().startswith(key + "/") for t in tags)


def carried_topic(topic: str | None, tags: Sequence[str], topics: Sequence[str]) -> str | None:
    """The taxonomy topic a note has now: its front matter ``topic``, else the topic of
    its first tag that is one (exactly, by case, or nested under it)."""
    if topic in topics:
        return topic
    for tag in tags:
        for name in topics:
            if carries((tag,), name):
                return name
    return None
