"""What every wire scanner needs of a model's text: positions, strict JSON, fences, think blocks.

One place for the checks the scanners used to copy: 1-based line/column of an
index, a JSON decoder that refuses NaN/Infinity and duplicate keys, the lone
surrogate test (a ``\\ud800`` escape decodes to a str no UTF-8 file or column
can hold), the markdown code fence a model wraps its answer in, and the
``<think>`` reasoning blocks reasoning models write every turn.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "FENCE_OPEN_RE",
    "THINK_CLOSE",
    "THINK_OPEN",
    "fenced_span",
    "line_column",
    "loads_plain",
    "loads_strict",
    "lone_surrogate",
    "reject_constant",
    "scan_plain",
    "scan_plain_once",
    "text_has_lone_surrogate",
    "think_spans",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# ```json, ```xml, ``` ... : the opening fence line (info string, trailing blanks, newline).
FENCE_OPEN_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n")
_WS = " \t\r\n"


def line_column(text: str, pos: int, origin: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """1-based line and column of ``text[pos]``; ``origin`` = (newlines, columns) before text[0]."""
    newlines = text.count("\n", 0, pos)
    if newlines:
        return origin[0] + newlines + 1, pos - text.rfind("\n", 0, pos)
    return origin[0] + 1, origin[1] + pos + 1


def reject_constant(name: str) -> Any:
    """``parse_constant`` hook: NaN and Infinity are not JSON (RFC 8259), json accepts them."""
    raise ValueError(f"{name} is not a JSON value")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


# Built once: json.loads with hooks would build a decoder (and its C scanner) per call.
_STRICT = json.JSONDecoder(parse_constant=reject_constant, object_pairs_hook=_unique_pairs)
# No object hook: objects are built in C. Duplicate keys must be ruled out another way
# (see ``scan_plain``).
_PLAIN = json.JSONDecoder(parse_constant=reject_constant)
scan_plain_once = _PLAIN.scan_once  # type: ignore[attr-defined]  # the C scanner


def loads_strict(text: str) -> Any:
    """``json.loads`` minus what JSON forbids or leaves ambiguous (NaN, duplicate keys).

    Raises ``json.JSONDecodeError`` (with a position), ``ValueError`` or
    ``RecursionError`` (nesting deeper than the C scanner allows).
    """
    return _STRICT.decode(text)


def loads_plain(text: str) -> Any:
    """``json.loads`` refusing NaN/Infinity but not duplicate keys (callers check those)."""
    return _PLAIN.decode(text)


def scan_plain(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON object starting at ``text[pos]`` and its end, decoded in C, or None.

    None unless the value is an object whose keys are certainly unique: every
    key needs a ':' after it, so an object holding as many keys as its span
    holds colons has no repeated key at any depth. Anything else (a colon in a
    string, nested objects, a decoding error) is left to ``loads_strict``.
    """
    if not text.startswith("{", pos):
        return None
    try:
        value, end = scan_plain_once(text, pos)
    except (StopIteration, ValueError, RecursionError):
        return None
    if text.count(":", pos, end) != len(value):
        return None
    return value, end


def lone_surrogate(value: Any, raw: str, lo: int = 0, hi: int | None = None) -> bool:
    """Does a value decoded from ``raw[lo:hi]`` hold a lone surrogate (from ``\\ud800``)?

    Such a string cannot be encoded as UTF-8: a tool, the store or the next
    prompt would fail on it later, so parsers refuse it at once.
    """
    hi = len(raw) if hi is None else hi
    # The common case: no escape and no non-ASCII character, so nothing could make one.
    if raw.find("\\", lo, hi) < 0 and (raw.isascii() or raw[lo:hi].isascii()):
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_has_lone_surrogate(text: str) -> bool:
    """A str (not JSON) holding a lone surrogate, as a provider's JSON decoder can hand us."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate cannot be encoded
        return True
    return False


def fenced_span(text: str, lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """The inside of a markdown code fence filling ``text[lo:hi]`` (blanks around allowed).

    Returns the span between the opening fence line and the closing ```, or
    None when the span is not one fenced block.
    """
    hi = len(text) if hi is None else hi
    while lo < hi and text[lo] in _WS:
        lo += 1
    while hi > lo and text[hi - 1] in _WS:
        hi -= 1
    if not text.startswith("```", lo):
        return None
    fence = FENCE_OPEN_RE.match(text, lo, hi)
    if fence is None or hi - 3 < fence.end() or not text.endswith("```", fence.end(), hi):
        return None
    return fence.end(), hi - 3


def think_spans(text: str) -> list[tuple[int, int]]:
    """``(start, stop)`` of every ``<think>...</think>`` block; an unclosed one runs to the end."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (start := text.find(THINK_OPEN, pos)) >= 0:
        end = text.find(THINK_CLOSE, start)
        stop = len(text) if end < 0 else end + len(THINK_CLOSE)
        spans.append((start, stop))
        pos = stop
    return spans
