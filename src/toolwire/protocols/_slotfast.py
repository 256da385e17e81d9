"""Whole-text fast path for seed 001's slot tags: a well-formed reply read in bulk.

``SlotScanner`` takes a Python step per tag (find, match, judge, decode,
construct), which is what a stream needs. A whole reply that is entirely
well formed (every ``<`` belongs to a canonical tag of this nonce, every
call valid) can be read with one ``findall`` and a few C-level ``map``s.
``fast_parse`` returns exactly what the scanner returns for such a reply,
and None for anything else (the caller then runs the scanner, which also
reports the problems). The vectors and the stream-equivalence properties
check both paths against each other.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from itertools import repeat
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols._slotscan import FINAL_STATUSES, REPORT_FORMATS, FinalTag
from toolwire.protocols._textcheck import lone_surrogate, scan_plain_once

__all__ = ["fast_parse"]

_FINAL, _PROGRESS = "FINAL", "PROGRESS"
_SPECIAL = frozenset((_FINAL, _PROGRESS))
_STATUSES = frozenset(FINAL_STATUSES)
_FORMATS = frozenset(REPORT_FORMATS)

# Building frozen dataclasses through their __init__ costs ~1 us each (one
# object.__setattr__ per field): more than decoding the call's JSON. The slot
# descriptors set the same fields from C inside ``map``; equality, hashing
# and repr are the dataclass's own.
_NEW = object.__new__
_SETTERS = tuple(ToolCall.__dict__[f].__set__ for f in ("id", "tool", "args", "source", "slot"))


def _tool_calls(names: list[str], tools: tuple[str, ...], args: list[Any]) -> list[ToolCall]:
    calls = list(map(_NEW, repeat(ToolCall, len(names))))
    set_id, set_tool, set_args, set_source, set_slot = _SETTERS
    for setter, values in (
        (set_id, names),
        (set_tool, tools),
        (set_args, args),
        (set_source, repeat("xml")),
        (set_slot, names),
    ):
        list(map(setter, calls, values))
    return calls


@lru_cache(maxsize=64)
def _tags(nonce: str) -> re.Pattern[str]:
    n = re.escape(nonce)
    # Only the canonical forms; any other spelling fails the "<" count and goes to the
    # scanner. Content holds no "<", so its close is the first "</" after it.
    return re.compile(
        rf"<{n}-([0-9]{{4}}|FINAL|PROGRESS)"
        rf'(?: tool="([^"<>\s]++)"| status="([^"<>\s]++)" format="([^"<>\s]++)")?+'
        rf">([^<]*+)</{n}-([0-9]{{4}}|FINAL|PROGRESS)>"
    )


def fast_parse(
    text: str,
    nonce: str,
    allowed: Collection[str] | None,
    slots: Collection[str] | None,
    mode: str,
) -> tuple[list[ToolCall], FinalTag | None, str | None] | None:
    """``(calls, final, progress)`` of an entirely well-formed reply, or None."""
    found = _tags(nonce).findall(text)
    if not found or text.count("<") != 2 * len(found):
        return None  # another "<" somewhere: a stray, broken or foreign tag, a <think>
    suffixes, tools, statuses, formats, contents, closes = zip(*found, strict=True)
    if suffixes != closes:
        return None
    final: FinalTag | None = None
    progress: str | None = None
    if suffixes[-1] == _FINAL and _PROGRESS not in suffixes and suffixes.count(_FINAL) == 1:
        # The usual layout: calls, then the final report. Slices, not a Python loop.
        if statuses[-1] not in _STATUSES or formats[-1] not in _FORMATS or tools[-1]:
            return None
        if not contents[-1].strip():
            return None
        final = FinalTag(statuses[-1], formats[-1], contents[-1], False, f"{nonce}-FINAL")
        suffixes, tools = suffixes[:-1], tools[:-1]
        statuses, contents = statuses[:-1], contents[:-1]
    elif _FINAL in suffixes or _PROGRESS in suffixes:
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
            elif tools[i]:
                return None
            elif not contents[i].strip():
                return None
            else:
                final = FinalTag(statuses[i], formats[i], contents[i], False, f"{nonce}-FINAL")
        suffixes = tuple([suffixes[i] for i in keep])
        tools = tuple([tools[i] for i in keep])
        statuses = tuple([statuses[i] for i in keep])
        contents = tuple([contents[i] for i in keep])
    if not suffixes:
        return [], final, progress
    if mode != "xml" or any(statuses):
        return None
    names = list(map((nonce + "-").__add__, suffixes))
    used = set(names)
    if len(used) != len(names) or (slots is not None and not used.issubset(slots)):
        return None
    if (not all(tools)) if allowed is None else not set(tools).issubset(allowed):
        return None
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
    if not (text.isascii() and "\\" not in text) and any(map(lone_surrogate, values, contents)):
        return None
    return _tool_calls(names, tools, list(values)), final, progress
