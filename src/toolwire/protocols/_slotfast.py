"""Whole-text fast path for seed 001's slot tags: a well-formed reply read in bulk.

``SlotScanner`` takes a Python step per tag (find, match, judge, decode,
construct), which is what a stream needs. A whole reply that is entirely
well formed (every ``<`` belongs to a canonical tag of this nonce, every
call valid) is read here in C as far as possible.

With the C speedups built (``_speedups.read_slot_tags``, the default): one C
pass reads every call and the final report, counts the colons outside JSON
strings and refuses digit runs orjson would misread; Python then checks slots,
tools and statuses by set, decodes with orjson and builds the results.

Without them (no C compiler at install), regular expressions:

- at most one call and a final report (the usual short reply): one
  ``fullmatch`` of the whole reply, its groups are the call and the report;
- more calls and at most one final report, in any order: one ``findall``
  for the calls, one ``match`` at the final report, and one count of ``<``
  proving that nothing else in the reply is markup.

Either way, a reply of canonical tags with progress notes is read by one
``findall`` of every tag. The arguments are decoded in C (json's scanner for
one call on the regex path, orjson otherwise) and the results built by
``_bulk.twin``. ``reader(nonce, ...)`` returns the nonce's reading function; it
returns exactly what the scanner returns for such a reply, and None for anything
else (the caller then runs the scanner, which also reports the problems). The
vectors and the equivalence properties check every path against the scanner.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from itertools import repeat
from typing import Any

import orjson

try:
    from toolwire.protocols._speedups import read_slot_tags
except ImportError:  # built at install when a C compiler is there; else the regex reader
    read_slot_tags = None  # type: ignore[assignment]

from toolwire.domain import ToolCall
from toolwire.protocols._bulk import twin
from toolwire.protocols._slotscan import FINAL_STATUSES, MODES, REPORT_FORMATS, FinalTag
from toolwire.protocols._textcheck import lone_surrogate, scan_plain_once

__all__ = ["MAX_CHARS", "Reader", "reader"]

# (text, allowed tools, slots, mode) -> the parse, or None: the scanner decides.
Reader = Callable[[str, "Collection[str] | None", "Collection[str] | None", str], Any]
_FINAL, _PROGRESS = "FINAL", "PROGRESS"
_SPECIAL = frozenset((_FINAL, _PROGRESS))
_STATUSES = frozenset(FINAL_STATUSES)
_FORMATS = frozenset(REPORT_FORMATS)
_MODES = frozenset(MODES)


# Replies longer than this go to the scanner: orjson's peak memory is ~13x its input
# (650 MB for one 50 MB argument, against the scanner's 100 MB), and the fast path
# pays off on the many short replies of batches and replays, not on one long one.
MAX_CHARS = 1 << 20

_new_call = twin(ToolCall)
_new_final = twin(FinalTag)
# orjson.JSONDecodeError is a ValueError: malformed JSON, NaN, Infinity, an overflowing
# float, a lone surrogate (raw or escaped), nesting deeper than 1,024.
_DECODE_ERRORS = (ValueError, RecursionError)
_decode = orjson.loads
# orjson turns an integer outside int64/uint64 into a float, where json keeps it exact.
# Such a number has at least 19 digits in a row; the rare text with such a run (an
# integer, a long fraction or exponent) goes to the scanner and its exact decoder.
_DIGITS_ONLY = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19


def _too_long_for_orjson(text: str) -> bool:
    return _LONG_RUN in text.encode("utf-8", "surrogatepass").translate(_DIGITS_ONLY)


def _calls(
    rows: list[tuple[str, str, str]], allowed: Collection[str] | None,
    slots: Collection[str] | None,
) -> list[ToolCall] | None:  # fmt: skip
    """The calls of ``findall`` rows (slot, tool, content starting with "{"), each valid,
    or None."""
    names, tools, contents = zip(*rows, strict=True)
    joined = ":".join(contents)
    if _too_long_for_orjson(joined):
        return None
    colons = joined.count(":") - (len(rows) - 1)
    return _checked_calls(names, tools, contents, colons, allowed, slots)


def _checked_calls(
    names: Sequence[str], tools: Sequence[str], contents: Sequence[str], colons: int,
    allowed: Collection[str] | None, slots: Collection[str] | None,
) -> list[ToolCall] | None:  # fmt: skip
    """The calls (slot, tool, content starting with "{"), each valid, or None.

    ``colons``: the colons in the contents that can separate a key from its value.
    """
    used = set(names)
    if len(used) != len(names) or (slots is not None and not used.issubset(slots)):
        return None  # a slot used twice or not offered
    if allowed is not None and not set(tools).issubset(allowed):
        return None
    try:
        values = list(map(_decode, contents))
    except _DECODE_ERRORS:
        return None
    # A content starting with "{" that decodes whole is one object. No repeated key:
    # every key needs a ":", so as many colons as keys.
    if sum(map(len, values)) != colons:
        return None
    return list(map(_new_call, names, tools, values, repeat("xml"), names))


def reader(nonce: str, result: Callable[..., Any], *, compiled: bool | None = None) -> Reader:
    """The reading function of one (normalised) nonce; it returns ``result(calls, final,
    progress, [], mode, ())`` for an entirely well-formed reply, None for anything else.

    ``compiled``: read the tags with the C reader (``_speedups``), or with regular
    expressions; None takes the C reader when it was built.
    """
    if compiled is None:
        compiled = read_slot_tags is not None
    elif compiled and read_slot_tags is None:
        raise RuntimeError("toolwire.protocols._speedups was not built (no C compiler)")
    n = re.escape(nonce)
    own, final_name = nonce + "-", nonce + "-FINAL"
    call = rf'<({n}-[0-9]{{4}}) tool="([^"<>\s]++)">(\{{[^<]*+)</\1>'
    statuses, formats = "|".join(FINAL_STATUSES), "|".join(map(re.escape, REPORT_FORMATS))
    final = rf'<{n}-FINAL status="({statuses})" format="({formats})">([^<]*+)</{n}-FINAL>'
    # At most one call, then at most one final report; text around them is no protocol
    # text (seed 001). Groups: 1-3 the call's slot, tool, content; 4-6 the final report's
    # status, format, content.
    short = re.compile(
        rf'[^<]*+(?:<({n}-[0-9]{{4}}) tool="([^"<>\s]++)">(\{{[^<]*+)</\1>[^<]*+)?+'
        rf"(?:{final}[^<]*+)?+"
    ).fullmatch
    calls_in = re.compile(call).findall
    final_at = re.compile(final).match
    final_open = f"<{final_name} "
    any_tag = re.compile(
        rf"<{n}-([0-9]{{4}}|FINAL|PROGRESS)"
        rf'(?: tool="([^"<>\s]++)"| status="([^"<>\s]++)" format="([^"<>\s]++)")?+'
        rf">([^<]*+)</{n}-([0-9]{{4}}|FINAL|PROGRESS)>"
    ).findall

    def any_order(
        text: str, allowed: Collection[str] | None, slots: Collection[str] | None, mode: str
    ) -> Any:
        """Canonical tags in any order: progress notes, a final report between calls."""
        found = any_tag(text)
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
                final = _new_final(statuses[i], formats[i], contents[i], False, final_name)
        if not keep:
            return result([], final, progress, [], mode, ())
        if mode != "xml" or any(statuses[i] or not tools[i] for i in keep):
            return None  # a call without its tool attribute: the scanner says why
        rows = [(own + suffixes[i], tools[i], contents[i]) for i in keep]
        if any(not row[2].startswith("{") for row in rows):
            return None
        calls = _calls(rows, allowed, slots)
        return None if calls is None else result(calls, final, progress, [], mode, ())

    def many(
        text: str, tags: int, allowed: Collection[str] | None, slots: Collection[str] | None,
        mode: str,
    ) -> Any:  # fmt: skip
        """Calls and at most one final report, in any order."""
        if mode not in _MODES:
            return None  # the scanner raises
        found = calls_in(text)
        at = text.rfind(final_open)
        m = final_at(text, at) if at >= 0 else None
        if tags != 2 * (len(found) + (m is not None)) or mode != "xml":
            return any_order(text, allowed, slots, mode)
        final = None
        if m is not None:
            status, fmt, report = m.groups()
            if not report.strip():
                return None  # an empty final report
            final = _new_final(status, fmt, report, False, final_name)
        calls = _calls(found, allowed, slots)
        return None if calls is None else result(calls, final, None, [], mode, ())

    progress_open = f"<{nonce}-{_PROGRESS}"

    def read_compiled(
        text: str, allowed: Collection[str] | None, slots: Collection[str] | None, mode: str
    ) -> Any:
        if mode not in _MODES or len(text) > MAX_CHARS:
            return None  # the scanner raises, or reads a long reply in less memory
        assert read_slot_tags is not None
        got = read_slot_tags(text, nonce)
        if got is None:
            # Progress notes (or a reply that is not for this path: the scanner decides).
            return any_order(text, allowed, slots, mode) if progress_open in text else None
        names, tools, contents, final_row, colons = got
        final = None
        if final_row is not None:
            status, fmt, report = final_row
            if status not in _STATUSES or fmt not in _FORMATS or not report.strip():
                return None
            final = _new_final(status, fmt, report, False, final_name)
        if not names:
            return result([], final, None, [], mode, ())
        if mode != "xml":
            return None  # a tool tag in xml-final
        if len(names) == 1:  # the usual reply: no sets, no maps
            name, tool = names[0], tools[0]
            if (slots is not None and name not in slots) or (
                allowed is not None and tool not in allowed
            ):
                return None
            try:
                args = _decode(contents[0])
            except _DECODE_ERRORS:
                return None
            if len(args) != colons:
                return None
            return result([_new_call(name, tool, args, "xml", name)], final, None, [], mode, ())
        # Colons outside strings only: one per key-value pair, so also no object nests.
        calls = _checked_calls(names, tools, contents, colons, allowed, slots)
        return None if calls is None else result(calls, final, None, [], mode, ())

    def read(
        text: str, allowed: Collection[str] | None, slots: Collection[str] | None, mode: str
    ) -> Any:
        if len(text) > MAX_CHARS:
            return None  # the scanner reads a long reply in less memory
        tags = text.count("<")
        if tags > 4 or mode not in _MODES:
            return many(text, tags, allowed, slots, mode)
        m = short(text)
        if m is None:
            return many(text, tags, allowed, slots, mode)
        name, tool, content, status, fmt, report = m.groups()
        final = None
        if status is not None:
            if not report.strip():
                return None  # an empty final report
            final = _new_final(status, fmt, report, False, final_name)
        if name is None:
            return result([], final, None, [], mode, ())
        if mode != "xml" or (slots is not None and name not in slots):
            return None  # a tool tag in xml-final, a slot not offered
        if allowed is not None and tool not in allowed:
            return None
        try:
            # One small object: the C json scanner costs less than the orjson route here.
            args, end = scan_plain_once(content, 0)
        except (StopIteration, ValueError, RecursionError):
            return None
        # A content starting with "{" is an object. Both terms are >= 0: nothing after it,
        # and as many colons as keys (every key needs one), so no key repeats.
        if len(content) - end + content.count(":") - len(args):
            return None
        if (not content.isascii() or "\\" in content) and lone_surrogate(args, content):
            return None
        return result([_new_call(name, tool, args, "xml", name)], final, None, [], mode, ())

    return read_compiled if compiled else read
