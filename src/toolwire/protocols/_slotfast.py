"""Whole-text fast path for seed 001's slot tags: a well-formed reply read in bulk.

``SlotScanner`` takes a Python step per tag (find, match, judge, decode,
construct), which is what a stream needs. A whole reply that is entirely
well formed (every ``<`` belongs to a canonical tag of this nonce, every
call valid) is read here in C as far as possible: the usual layout (calls,
then the final report, text between them) by one ``fullmatch`` of the whole
reply plus one ``findall`` for the calls, any other order of canonical tags
(progress notes, a final report between calls) by one ``findall``; the
arguments are decoded and the calls built by ``map``s. ``fast_parse``
returns exactly what the scanner returns for such a reply, and None for
anything else (the caller then runs the scanner, which also reports the
problems). The vectors and the equivalence properties check both paths
against each other.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from itertools import repeat
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols._bulk import constructor, tool_calls
from toolwire.protocols._slotscan import FINAL_STATUSES, REPORT_FORMATS, FinalTag
from toolwire.protocols._textcheck import lone_surrogate, scan_plain_once

__all__ = ["fast_parse"]

Found = tuple[list[ToolCall], FinalTag | None, str | None]  # calls, final report, progress
_FINAL, _PROGRESS = "FINAL", "PROGRESS"
_SPECIAL = frozenset((_FINAL, _PROGRESS))
_STATUSES = frozenset(FINAL_STATUSES)
_FORMATS = frozenset(REPORT_FORMATS)
# A lone surrogate comes from a raw one (not ASCII) or a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")
_new_call = constructor(ToolCall)
_new_final = constructor(FinalTag)


@lru_cache(maxsize=64)
def _patterns(nonce: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The nonce's patterns: the usual whole reply, one call, any canonical tag.

    Only canonical spellings; anything else does not match (or fails the "<" count) and
    goes to the scanner. A content holds no "<", so its close is the first "</" after it.
    """
    n = re.escape(nonce)
    call = rf'<{n}-([0-9]{{4}}) tool="([^"<>\s]++)">([^<]*+)</{n}-\1>'
    statuses, formats = "|".join(FINAL_STATUSES), "|".join(map(re.escape, REPORT_FORMATS))
    final = rf'<{n}-FINAL status="({statuses})" format="({formats})">([^<]*+)</{n}-FINAL>'
    # Groups: 1-3 the last call's slot number, tool and content; 4-6 the final report's
    # status, format and content. Text between tags is no protocol text (seed 001).
    whole = rf"[^<]*+(?:{call}[^<]*+)*+(?:{final}[^<]*+)?+"
    any_tag = (
        rf"<{n}-([0-9]{{4}}|FINAL|PROGRESS)"
        rf'(?: tool="([^"<>\s]++)"| status="([^"<>\s]++)" format="([^"<>\s]++)")?+'
        rf">([^<]*+)</{n}-([0-9]{{4}}|FINAL|PROGRESS)>"
    )
    return re.compile(whole), re.compile(call), re.compile(any_tag)


def _decode(contents: Any, text: str) -> list[Any] | None:
    """Each content as a JSON object, decoded in C, or None unless every one is an object
    with no repeated key, no NaN, no lone surrogate, and nothing around it."""
    try:
        # A value that does not decode raises StopIteration, which ends map() early
        # instead of propagating: a short list is the failure.
        decoded = list(map(scan_plain_once, contents, repeat(0)))
    except (ValueError, RecursionError):
        return None
    if len(decoded) != len(contents):
        return None
    values, ends = zip(*decoded, strict=True)
    if list(ends) != list(map(len, contents)) or set(map(type, values)) != {dict}:
        return None
    # Duplicate keys: every key needs a ":", so as many colons as keys means none repeats.
    if sum(map(len, values)) != sum(map(str.count, contents, repeat(":"))):
        return None
    # One pass over the text rules out lone surrogates, leaving the per-value check to
    # the rare rest.
    if (not text.isascii() or _SURROGATE_ESCAPE_RE.search(text)) and any(
        map(lone_surrogate, values, contents)
    ):
        return None
    return list(values)


def _calls(
    text: str, nonce: str, found: Any, allowed: Collection[str] | None,
    slots: Collection[str] | None,
) -> list[ToolCall] | None:  # fmt: skip
    """The calls of ``found`` (slot numbers, tools, contents), each valid, or None."""
    suffixes, tools, contents = found
    names = list(map((nonce + "-").__add__, suffixes))
    used = set(names)
    if len(used) != len(names) or (slots is not None and not used.issubset(slots)):
        return None  # a slot used twice or not offered
    if (not all(tools)) if allowed is None else not set(tools).issubset(allowed):
        return None
    values = _decode(contents, text)
    if values is None:
        return None
    if len(names) == 1:  # building in bulk pays from two calls on
        return [_new_call(names[0], tools[0], values[0], "xml", names[0])]
    return tool_calls(names, tools, values, "xml", names)


def fast_parse(
    text: str,
    nonce: str,
    allowed: Collection[str] | None,
    slots: Collection[str] | None,
    mode: str,
) -> Found | None:
    """``(calls, final, progress)`` of an entirely well-formed reply, or None."""
    whole, call, any_tag = _patterns(nonce)
    m = whole.fullmatch(text)
    if m is None:
        return _any_order(text, nonce, any_tag, allowed, slots, mode)
    suffix, tool, content, status, fmt, report = m.groups()
    final = None
    if status is not None:
        if not report.strip():
            return None  # an empty final report
        final = _new_final(status, fmt, report, False, nonce + "-FINAL")
    if suffix is None:
        return [], final, None
    if mode != "xml":
        return None  # tool tags are not read in xml-final
    if text.count("<") == 2 + 2 * (final is not None):  # one call: the match holds it
        found: Any = ((suffix,), (tool,), (content,))
    else:
        found = zip(*call.findall(text), strict=True)
    calls = _calls(text, nonce, found, allowed, slots)
    return None if calls is None else (calls, final, None)


def _any_order(
    text: str, nonce: str, any_tag: re.Pattern[str], allowed: Collection[str] | None,
    slots: Collection[str] | None, mode: str,
) -> Found | None:  # fmt: skip
    """Canonical tags in any order: progress notes, a final report between calls."""
    found = any_tag.findall(text)
    if not found or text.count("<") != 2 * len(found):
        return None  # another "<" somewhere: a stray, broken or foreign tag, a <think>
    suffixes, tools, statuses, formats, contents, closes = zip(*found, strict=True)
    if suffixes != closes:
        return None
    final: FinalTag | None = None
    progress: str | None = None
    keep = []
    for i, suffix in enumerate(suffixes):
        if suffix not in _SPECIAL:
            keep.append(i)
        elif suffix == _PROGRESS:
            progress = contents[i].strip()
            if mode != "xml" or not progress or tools[i] or statuses[i]:
                return None
        elif final is not None or statuses[i] not in _STATUSES or formats[i] not in _FORMATS:
            return None
        elif tools[i] or not contents[i].strip():
            return None
        else:
            final = FinalTag(statuses[i], formats[i], contents[i], False, f"{nonce}-FINAL")
    if not keep:
        return [], final, progress
    if mode != "xml" or any(statuses[i] for i in keep):
        return None
    columns = ([suffixes[i] for i in keep], [tools[i] for i in keep], [contents[i] for i in keep])
    calls = _calls(text, nonce, columns, allowed, slots)
    return None if calls is None else (calls, final, progress)
