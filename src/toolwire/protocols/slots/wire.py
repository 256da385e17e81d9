"""Seed 001's names: the session nonce and slots (``ai-agent-<8 hex>``, ``NONCE-0001``...,
``NONCE-FINAL``, ``NONCE-PROGRESS``) and the tags that are not executed. A tag is honoured
only under this run's nonce and a slot offered this turn, so text copied from a note or
an old turn cannot call a tool."""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any, Literal

from toolwire.errors import UsageError
from toolwire.protocols.text import think_spans

__all__ = [
    "DETAILS",
    "INVALID_JSON_ARGS",
    "MODES",
    "PROGRESS_TOOL",
    "InvalidTag",
    "Mode",
    "final_slot",
    "find_nonce",
    "new_nonce",
    "normalize_nonce",
    "progress_slot",
    "slot_ids",
]

PROGRESS_TOOL = "agent__progress"
Mode = Literal["xml", "xml-final"]
MODES: tuple[str, ...] = ("xml", "xml-final")
INVALID_JSON_ARGS = "INVALID_JSON_ARGS"  # also the native transport's code for bad arguments

# An InvalidTag's code -> its sentence, written for the model to act on ({name} is the tag
# name). A code with two sentences has a second key, used by the scanner.
DETAILS = {
    "WRONG_NONCE": "<{name}> does not carry this session's nonce {nonce}: use the tag names "
    "given in XML-NEXT.",
    "UNDECLARED_SLOT": "slot {name} is not offered this turn: use the slots listed in XML-NEXT.",
    "DUPLICATE_SLOT": "slot {name} is used twice in this reply: give each call its own slot.",
    "MISSING_TOOL_ATTRIBUTE": 'the tag has no tool="..." attribute: name the tool to call.',
    "TOOL_NOT_ALLOWED": 'tool "{tool}" is not available: use one of {tools}.',
    "UNCLOSED_TAG": "the tag is never closed: end it with </{name}>.",
    "UNCLOSED_OPEN_TAG": "the opening tag is cut off{cut} before its '>': write complete tags.",
    "EMPTY_CONTENT": "the tag is empty: put the arguments between the tags as one JSON object.",
    "EMPTY_PROGRESS": "the progress tag is empty: write one short line or leave the tag out.",
    "EMPTY_FINAL": "the final report is empty: write the report between the tags.",
    INVALID_JSON_ARGS: "{reason}",
    "MALFORMED_TAG": "the opening tag is not well formed: write it exactly as in XML-NEXT, "
    'attribute values in double quotes, each attribute once, e.g. <SLOT tool="NAME">.',
    "NON_FINAL_TAG_IN_XML_FINAL": "<{name}> is not the final report: in this mode only the "
    "final report is written as XML; call tools with native tool calls.",
    "DUPLICATE_FINAL": "a final report was already given in this reply: write only one.",
    "INVALID_FINAL_STATUS": 'status is {status}: write status="success", "failure" or "partial".',
    "MISSING_FINAL_FORMAT": 'the final report has no format="..." attribute: add the format '
    "given in XML-NEXT.",
    "UNKNOWN_FINAL_FORMAT": 'format "{format}" is unknown: use the format given in XML-NEXT.',
    "FINAL_TRUNCATED": "the {format} final report was cut off by the output limit before "
    "</{name}>: write a shorter report.",
}


@dataclass(frozen=True, slots=True)
class InvalidTag:
    """A tag that is not executed; fed back to the model and counted, never dropped."""

    code: str
    slot: str | None
    tool: str | None
    detail: str  # one sentence written for the model to act on
    line: int
    column: int
    content_bytes: int = 0  # UTF-8 size of the tag's content, for accounting

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["content_bytes"]  # accounting, not part of what the reply says
        return data


_NONCE_RE = re.compile(r"(?:ai-agent-)?([0-9a-f]{8})\Z")
_TAG_NONCE_RE = re.compile(r"<(ai-agent-[0-9a-f]{8})-")


def find_nonce(text: str) -> str | None:
    """The nonce of the first tag outside reasoning (``toolwire parse`` without ``--nonce``)."""
    start = 0
    for think_start, think_stop in [*think_spans(text), (len(text), len(text))]:
        m = _TAG_NONCE_RE.search(text, start, think_start)
        if m is not None:
            return m.group(1)
        start = think_stop
    return None


def new_nonce() -> str:
    """A per-run nonce ``ai-agent-<8 lowercase hex>``, fixed for every turn of the run."""
    return f"ai-agent-{secrets.token_hex(4)}"


def normalize_nonce(value: str) -> str:
    """``ai-agent-1a2b3c4d`` from itself or from ``1a2b3c4d`` (the CLI's ``--nonce``)."""
    m = _NONCE_RE.match(value)
    if m is None:
        raise UsageError(f"a nonce is ai-agent-<8 lowercase hex digits>, got {value!r}")
    return f"ai-agent-{m.group(1)}"


def slot_ids(nonce: str, start: int, count: int) -> list[str]:
    """Slots ``NONCE-0001``...: ``start`` is the 1-based number of the first one.

    Numbers run across turns: with 3 slots per turn, turn 1 gets 1-3 and turn 2
    ``slot_ids(nonce, 4, 3)``, so a slot copied from an old turn is undeclared.
    """
    if start < 1 or count < 0:
        raise ValueError(f"slot numbers start at 1 and count >= 0, got {start=}, {count=}")
    return [f"{nonce}-{n:04d}" for n in range(start, start + count)]


def final_slot(nonce: str) -> str:
    return f"{nonce}-FINAL"


def progress_slot(nonce: str) -> str:
    return f"{nonce}-PROGRESS"
