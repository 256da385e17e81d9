"""Blocks of a note that toolwire owns and rewrites (``reorganize:`` in the spec).

A block runs from a ``<!-- toolwire:NAME -->`` line to a ``<!-- /toolwire:NAME -->``
line. HTML comments: Obsidian and every CommonMark renderer hide them, and a user can
see where toolwire's text starts and ends. Everything outside the block is the user's
and is kept byte for byte; the block itself is toolwire's to replace.

The block is not part of the note's text for anything that judges the note
(``Note.body`` leaves it out): the scorer would otherwise read other notes' titles as
this note's words, and links toolwire wrote as evidence of the links it writes.
"""

from __future__ import annotations

import re

__all__ = ["block_span", "set_block", "strip_blocks"]

_ANY_BLOCK = re.compile(
    r"^[ \t]*<!-- toolwire:(?P<name>[a-z-]+) -->[ \t]*\r?\n"
    r".*?"
    r"^[ \t]*<!-- /toolwire:(?P=name) -->[ \t]*(?:\r?\n|\Z)",
    re.MULTILINE | re.DOTALL,
)


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"^[ \t]*<!-- toolwire:{name} -->[ \t]*\r?\n.*?^[ \t]*<!-- /toolwire:{name} -->"
        r"[ \t]*(?:\r?\n|\Z)",
        re.MULTILINE | re.DOTALL,
    )


def block_span(text: str, name: str) -> tuple[int, int] | None:
    """Where the block ``name`` is in ``text`` (start, end offsets), or None."""
    m = _block(name).search(text)
    return (m.start(), m.end()) if m else None


def strip_blocks(text: str) -> str:
    """``text`` without any toolwire block (the note's own words)."""
    return _ANY_BLOCK.sub("", text) if "<!-- toolwire:" in text else text


def set_block(text: str, name: str, content: str, nl: str = "\n") -> str:
    """``text`` with the block ``name`` holding ``content`` (lines, without markers).

    An existing block is replaced where it stands; a new one is appended at the end
    after a blank line; empty ``content`` removes the block. Nothing else changes."""
    lines = content.strip("\n").split("\n") if content.strip() else []
    block = (
        nl.join([f"<!-- toolwire:{name} -->", *lines, f"<!-- /toolwire:{name} -->"]) + nl
        if lines
        else ""
    )
    span = block_span(text, name)
    if span is not None:
        start, end = span
        if not block and end >= len(text) and text[:start].endswith(nl + nl):
            start -= len(nl)  # removed from the end: with the blank line added before it
        return text[:start] + block + text[end:]
    if not block:
        return text
    if not text:
        return block
    ending = "" if text.endswith(("\n", "\r")) else nl
    return text + ending + nl + block  # after one blank line
