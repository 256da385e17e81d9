"""Seed 002's envelopes written out: the request the librarian sends, the response a
well-behaved model writes (replay scripts, the ``render`` command, round trips).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from toolwire.domain import LibrarianResponse
from toolwire.errors import UsageError
from toolwire.protocols.attrless.scanner import TAG_NAME
from toolwire.protocols.text import escape_text

__all__ = ["LibrarianRequest", "Source", "render_request", "render_response", "response_to_dict"]

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
_TAG_NAME_RE = re.compile(TAG_NAME, re.ASCII)


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


def _tag(tag: str, value: Any, block: bool = False) -> str:
    """``<tag>value</tag>``: booleans as true/false (the seed's example), None as empty,
    anything else str(), escaped. A multi-line ``block`` starts and ends on lines of its
    own; the parser strips exactly one newline at each end, so the text comes back."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = "" if value is None else str(value)
    escaped = escape_text(text)
    if block and "\n" in text:
        escaped = f"\n{escaped}\n"
    return f"<{tag}>{escaped}</{tag}>"


def render_request(req: LibrarianRequest) -> str:
    """The request envelope laid out like seed 002's Minimal Example.

    Raises ``UsageError`` for a request the seed forbids (no source) or one that
    cannot be written without attributes (a constraint key that is not a tag name).
    """
    if not req.sources:
        raise UsageError("a librarian request needs at least one <source> (seed 002)")
    out = [f"<{REQUEST_ROOT}>", _tag("request_id", req.request_id)]
    out += [_tag("goal", req.goal), _tag("scope", req.scope), "<source_bundle>"]
    for s in req.sources:
        out += ["<source>", _tag("source_id", s.source_id), _tag("title", s.title)]
        out += [_tag("body_markdown", s.body_markdown, True), _tag("kind", s.kind)]
        out.append("</source>")
    out += ["</source_bundle>", "<taxonomy>"]
    out += [_tag("topic", topic) for topic in req.topics]
    out += [_tag("section", section) for section in req.sections]
    out += ["</taxonomy>", "<constraints>"]
    for key, value in req.constraints:
        if not isinstance(key, str) or _TAG_NAME_RE.fullmatch(key) is None:
            raise UsageError(
                f"constraint key {key!r} is not a tag name: use letters, digits, '_', '.', "
                "'-', starting with a letter or '_'"
            )
        out.append(_tag(key, value))
    out += ["</constraints>", _tag("output_contract", req.output_contract)]
    out.append(f"</{REQUEST_ROOT}>")
    return "\n".join(out) + "\n"


def _decimal(value: float) -> str:
    """Shortest exact plain decimal of a float (no exponent: the parser rejects those)."""
    return format(Decimal(repr(float(value))), "f")


def render_response(resp: LibrarianResponse) -> str:
    """The envelope a well-behaved model writes; the inverse of ``parse_response``.

    Warnings are written as ``<warning>`` children so that one may hold any text.
    """
    out = [f"<{RESPONSE_ROOT}>", _tag("request_id", resp.request_id)]
    out += [_tag("status", resp.status), _tag("summary", resp.summary), "<operations>"]
    for op in resp.operations:
        out.append("<operation>")
        for name in OPERATION_TAGS:
            value = getattr(op, name)
            if name == "confidence":
                value = _decimal(value)
            if value is not None or not name.startswith("target_"):  # absent targets left out
                out.append(_tag(name, value, name == "body_markdown"))
        out.append("</operation>")
    out += ["</operations>", "<warnings>"]
    out += [_tag("warning", warning) for warning in resp.warnings]
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
