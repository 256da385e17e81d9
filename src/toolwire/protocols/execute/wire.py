"""Seed 000's wire rules for the ``execute`` transport: the tag patterns, the messages the
model reads, and what the scanner hands on (``RawCall``, ``ScanEnd``, ``value_text``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toolwire.protocols.text import unescape_text

__all__ = [
    "EXECUTE_INVALID",
    "Pieces",
    "RawCall",
    "ScanEnd",
    "value_text",
]  # and the patterns, messages and states the scanner shares

EXECUTE_INVALID = "EXECUTE_INVALID"  # errors.py holds no constant for seed 000 yet

WS = " \t\r\n"
NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*+"
# A tag is at most 256 characters past its name; longer is text.
TAG_RE = re.compile(rf"<(/?)({NAME})([^<>]{{0,256}})>")
PARTIAL_TAG_RE = re.compile(rf"</?(?:{NAME}[^<>]{{0,256}})?\Z")  # a tag cut off by the end
SPACE_RE = re.compile(r"[ \t\r\n]*+")
CDATA = "<![CDATA["
EXEC_CLOSE_RE = re.compile(r"</execute[ \t\r\n]*+>")
JSON_PLAIN_RE = re.compile(r'[^"<]*+')  # JSON text up to a string or a possible </execute>
JSON_STRING_RE = re.compile(r'(?:[^"\\]++|\\.)*+', re.S)
_LAYOUT_HEAD_RE = re.compile(r"\r?\n")
_LAYOUT_TAIL_RE = re.compile(r"\r?\n[ \t]*+\Z")
OUTSIDE = ("think", "execute", "results")  # the only tags read outside the block

# The scanner's states.
OUT, THINK, BLOCK, TOOL, ARG, JSON_FORM, DONE = range(7)

EMPTY = "calls no tool: put at least one call in it, or leave it out and write your answer."
ATTRS = "Tag <{tag} ...> {{at}} has attributes; this protocol uses none: remove them."
ATTRS_CALL = (
    "Tag <{tag} ...> {{at}} has attributes; this protocol uses none: write each argument as "
    "an element, <tool><arg>value</arg></tool>."
)
MARKUP = (
    ("<!--", "a comment <!--"),
    ("<![CDATA[", "a CDATA section outside an argument"),
    ("<?", "a processing instruction <?"),
)
TEXT_IN_EXECUTE = (
    "Text {at} is inside <execute> but outside any call: put only tool elements, or one JSON "
    "array, in the block."
)
SAFE = (
    " A value holding markup (HTML, XML, </execute>) goes inside <![CDATA[ ... ]]>, or escape"
    " < as &lt; and > as &gt;."
)
JSON_SHAPE = 'Write [{"name": "tool", "args": {"argument": value}}, ...].'

Pieces = list[tuple[bool, str]]  # (is CDATA, text) runs of one argument value


@dataclass(slots=True)
class RawCall:
    """A tool element as written: its name, position, index in the block, raw arguments."""

    name: str
    pos: int
    index: int
    args: list[tuple[str, int, Pieces]] = field(default_factory=list)  # (name, pos, pieces)


@dataclass(frozen=True, slots=True)
class ScanEnd:
    """What the scanner makes of a whole reply besides its calls."""

    think: str | None
    answer: str | None  # None when the reply has an <execute> block
    trailing: bool  # non-blank text after </execute> (ignored)
    notes: tuple[str, ...]
    end: int | None  # index just past the block's </execute>


def value_text(pieces: Pieces) -> str:
    """An argument's text: entities decoded outside CDATA, CDATA taken literally.

    A value that is one CDATA section (with only whitespace around it) is that
    section's text exactly. Otherwise one newline after the opening tag and one
    newline plus the closing tag's indentation are layout, not value.
    """
    cdata = [text for is_cdata, text in pieces if is_cdata]
    if len(cdata) == 1 and all(is_cdata or not text.strip(WS) for is_cdata, text in pieces):
        return cdata[0]
    parts = [text for _, text in pieces]
    if parts and not pieces[0][0]:
        head = _LAYOUT_HEAD_RE.match(parts[0])
        if head is not None:
            parts[0] = parts[0][head.end() :]
    if parts and not pieces[-1][0]:
        parts[-1] = _LAYOUT_TAIL_RE.sub("", parts[-1], count=1)
    return "".join(
        text if is_cdata or "&" not in text else unescape_text(text)
        for (is_cdata, _), text in zip(pieces, parts, strict=True)
    )
