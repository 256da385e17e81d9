"""Seed 002's envelopes written out: the request the librarian sends, the response a
well-behaved model writes (replay scripts, the ``render`` command, round trips).

One tag per line, every value escaped; a multi-line value starts and ends on
lines of its own. Nothing here parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from toolwire.domain import LibrarianResponse
from toolwire.errors import UsageError
from toolwire.protocols.text import escape_text

__all__ = [
    "OPERATION_TAGS",
    "REQUEST_ROOT",
    "RESPONSE_ROOT",
    "LibrarianRequest",
    "Source",
    "render_request",
    "render_response",
    "response_to_dict",
]

REQUEST_ROOT = "librarian_request"
RESPONSE_ROOT = "librarian_response"
OPERATION_TAGS = (
    "operation_id",
    "kind",
    "target_note_id",
    "target_path",
    "title",
    "body_markdown",
    "reason",
    "confidence",
)
_TAG_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z", re.ASCII)


@dataclass(frozen=True, slots=True)
class Source:
    """One note as the request shows it to the model."""

    source_id: str
    title: str
    body_markdown: str
    kind: str = "markdown"


@dataclass(frozen=True, slots=True)
class LibrarianRequest:
    """Seed 002's request envelope; ``constraints`` keep their order."""

    request_id: str
    goal: str
    scope: str
    sources: tuple[Source, ...]
    topics: tuple[str, ...]
    sections: tuple[str, ...] = ()
    constraints: tuple[tuple[str, str], ...] = ()
    output_contract: str = "xml_attrless"


def _text(value: Any) -> str:
    """Booleans as true/false (the seed's example), None as empty, anything else str()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _tag_line(tag: str, value: Any) -> str:
    return f"<{tag}>{escape_text(_text(value))}</{tag}>"


def _block_line(tag: str, value: Any) -> str:
    """A multi-line value starts and ends on lines of its own; the parser strips
    exactly one newline at each end, so the original text comes back unchanged."""
    text = _text(value)
    escaped = escape_text(text)
    if "\n" in text:
        escaped = f"\n{escaped}\n"
    return f"<{tag}>{escaped}</{tag}>"


def render_request(req: LibrarianRequest) -> str:
    """The request envelope laid out like seed 002's Minimal Example.

    Raises ``UsageError`` for a request the seed forbids (no source) or one that
    cannot be written without attributes (a constraint key that is not a tag name).
    """
    if not req.sources:
        raise UsageError("a librarian request needs at least one <source> (seed 002)")
    out = [f"<{REQUEST_ROOT}>", _tag_line("request_id", req.request_id)]
    out += [_tag_line("goal", req.goal), _tag_line("scope", req.scope), "<source_bundle>"]
    for s in req.sources:
        out += ["<source>", _tag_line("source_id", s.source_id), _tag_line("title", s.title)]
        out += [_block_line("body_markdown", s.body_markdown), _tag_line("kind", s.kind)]
        out.append("</source>")
    out += ["</source_bundle>", "<taxonomy>"]
    out += [_tag_line("topic", topic) for topic in req.topics]
    out += [_tag_line("section", section) for section in req.sections]
    out += ["</taxonomy>", "<constraints>"]
    for key, value in req.constraints:
        if not isinstance(key, str) or _TAG_NAME_RE.match(key) is None:
            raise UsageError(
                f"constraint key {key!r} is not a tag name: use letters, digits, '_', '.', "
                "'-', starting with a letter or '_'"
            )
        out.append(_tag_line(key, value))
    out += ["</constraints>", _tag_line("output_contract", req.output_contract)]
    out.append(f"</{REQUEST_ROOT}>")
    return "\n".join(out) + "\n"


def _decimal(value: float) -> str:
    """Shortest exact plain decimal of a float (no exponent: the parser rejects those)."""
    return format(Decimal(repr(float(value))), "f")


def render_response(resp: LibrarianResponse) -> str:
    """The envelope a well-behaved model writes; the inverse of ``parse_response``.

    Warnings are written as ``<warning>`` children so that one may hold any text.
    """
    out = [f"<{RESPONSE_ROOT}>", _tag_line("request_id", resp.request_id)]
    out += [_tag_line("status", resp.status), _tag_line("summary", resp.summary), "<operations>"]
    for op in resp.operations:
        out += ["<operation>", _tag_line("operation_id", op.operation_id)]
        out.append(_tag_line("kind", op.kind))
        if op.target_note_id is not None:
            out.append(_tag_line("target_note_id", op.target_note_id))
        if op.target_path is not None:
            out.append(_tag_line("target_path", op.target_path))
        out += [_tag_line("title", op.title), _block_line("body_markdown", op.body_markdown)]
        out += [_tag_line("reason", op.reason), _tag_line("confidence", _decimal(op.confidence))]
        out.append("</operation>")
    out += ["</operations>", "<warnings>"]
    out += [_tag_line("warning", warning) for warning in resp.warnings]
    out += ["</warnings>", f"</{RESPONSE_ROOT}>"]
    return "\n".join(out) + "\n"


def response_to_dict(resp: LibrarianResponse) -> dict[str, Any]:
    """JSON-able form with keys in envelope order (``toolwire parse``, test vectors)."""
    return {
        "request_id": resp.request_id,
        "status": resp.status,
        "summary": resp.summary,
        "operations": [
            {name: getattr(op, name) for name in OPERATION_TAGS} for op in resp.operations
        ],
        "warnings": list(resp.warnings),
        "parse_warnings": list(resp.parse_warnings),
    }
