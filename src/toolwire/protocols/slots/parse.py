"""Seed 001's reply side: ``parse_slots`` finds a whole reply's tags by substring, as the
implementation the seed comes from does (a search for the next ``<ai-agent-``, one anchored
regex per tag: no per-character Python work), and returns its calls, final report,
progress note and invalid tags. Nothing here executes a tool or knows a provider.

A tag's content runs to its own closing tag, and a tag of this session that never
closes swallows the rest of the text. Markup inside the content (even another
``<ai-agent-`` tag) is content. A tag with another nonce that never closes is skipped as
its opening tag alone (seed 001 skips such tags; skipping must not eat the real ones after
it). ``<think>...</think>`` blocks are reasoning, not protocol text: tags mentioned in them
are neither run nor reported; an unclosed ``<think>`` makes the rest of the reply
reasoning, and says so in ``notes``.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from toolwire.domain import ToolCall
from toolwire.errors import ProtocolError
from toolwire.protocols.final_report import (
    FINAL_REPORT_TOOL,
    FINAL_STATUSES,
    REPORT_FORMATS,
    TRUNCATION_REJECTED,
    FinalTag,
)
from toolwire.protocols.slots.wire import (
    DETAILS,
    INVALID_JSON_ARGS,
    MODES,
    PROGRESS_TOOL,
    InvalidTag,
    Mode,
    final_slot,
    normalize_nonce,
    progress_slot,
)
from toolwire.protocols.text import (
    THINK_CLOSE,
    THINK_OPEN,
    Lines,
    loads_strict,
    located_error,
    lone_surrogate,
)
from toolwire.stop_reasons import normalize_finish_reason

__all__ = ["SlotParse", "final_report_call", "merge_native_calls", "parse_slots", "parse_tool_args"]

_WS = "[ \t\r\n]"
# What the scan stops at: a tag of any nonce, or reasoning.
_NEXT_RE = re.compile(r"<(?:ai-agent-|think>)")
# The opening tag, up to its first ">": no part of it matches "<" or ">" past its start
# (possessive: no backtracking), so a failed match reads no further than the next "<".
_OPEN_RE = re.compile(
    rf"<(ai-agent-[A-Za-z0-9_-]*+)"
    rf"((?:{_WS}++[A-Za-z_][A-Za-z0-9_.:-]*+{_WS}*+={_WS}*+(?:\"[^\"<>]*+\"|'[^'<>]*+'))*+)"
    rf"{_WS}*+(/?)>"
)
_ATTR_RE = re.compile(rf"([A-Za-z_][A-Za-z0-9_.:-]*+){_WS}*+={_WS}*+(?:\"([^\"]*+)\"|'([^']*+)')")
_NAME_RE = re.compile(r"ai-agent-[A-Za-z0-9_-]*+")
_CLOSE_RE = re.compile(rf"</(ai-agent-[A-Za-z0-9_-]*+){_WS}*+>")
_ANY_SLOT_RE = re.compile(r"[0-9]{4}\Z")
_JSON_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


# ------------------------------------------------------------------ JSON arguments


def _bad_args(detail: str, problem: str, raw: str = "", pos: int | None = None) -> ProtocolError:
    return located_error(INVALID_JSON_ARGS, raw, pos, detail, f"The arguments {problem}.")


def parse_tool_args(raw: str) -> dict[str, Any]:
    """The arguments of one tool call: exactly one JSON object.

    Raises ``ProtocolError(INVALID_JSON_ARGS)`` with a detail code (``EMPTY``,
    ``JSON_SYNTAX``, ``JSON_VALUE``, ``NOT_AN_OBJECT``, ``INVALID_CHARACTER``);
    line and column, when given, are inside ``raw``.
    """
    text = raw.strip()
    if not text:
        raise _bad_args("EMPTY", "are empty: write one JSON object")
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as exc:
        pos = len(raw) - len(raw.lstrip()) + exc.pos
        problem = f"are not valid JSON ({exc.msg}, {{at}} of the arguments): write one JSON object"
        raise _bad_args("JSON_SYNTAX", problem, raw, pos) from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        problem = f"are not valid JSON ({reason}): write one JSON object"
        raise _bad_args("JSON_VALUE", problem) from None
    if not isinstance(value, dict):
        kind = _JSON_TYPES.get(type(value), "null")
        problem = f'are a JSON {kind}, not an object: write {{"name": value, ...}}'
        raise _bad_args("NOT_AN_OBJECT", problem)
    if lone_surrogate(value, text):
        problem = "contain an unpaired surrogate escape (\\ud800-\\udfff): remove it"
        raise _bad_args("INVALID_CHARACTER", problem)
    return value


# ------------------------------------------------------------------ the reply


@dataclass(frozen=True, slots=True)
class SlotParse:
    """What one reply holds: valid calls in text order, the final report, progress, and
    every tag that is not executed (each must be reported back and counted)."""

    calls: list[ToolCall]
    final: FinalTag | None
    progress: str | None
    invalid: list[InvalidTag]
    mode: Mode = "xml"
    notes: tuple[str, ...] = ()  # what was read but is no tag (an unclosed <think>)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [asdict(call) for call in self.calls],
            "final": self.final.to_dict() if self.final is not None else None,
            "progress": self.progress,
            "invalid": [tag.to_dict() for tag in self.invalid],
            "notes": list(self.notes),
        }


def parse_slots(
    text: str,
    *,
    nonce: str,
    allowed_tools: Collection[str] | None,
    slots: Collection[str] | None,
    mode: Mode,
    finish_reason: str = "stop",
) -> SlotParse:
    """Every tag in a whole reply; never raises on any text.

    ``allowed_tools`` / ``slots`` None accept any tool / any numbered slot of the
    nonce: a check of the wire format alone.

    ``finish_reason`` judges an unclosed FINAL: ``length`` (cut by the output
    limit) rejects json/slack-block-kit and marks text formats truncated.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    scan = _Scan(text, normalize_nonce(nonce), allowed_tools, slots, mode)
    # Providers name a cut reply length, max_tokens, MAX_TOKENS...
    scan.run(normalize_finish_reason(finish_reason))
    return SlotParse(scan.calls, scan.final, scan.progress, scan.invalid, mode, tuple(scan.notes))


def final_report_call(tag: FinalTag) -> ToolCall:
    """The final report as the call the seed's accounting records (``agent__final_report``)."""
    args: dict[str, Any] = {"status": tag.status, "format": tag.format, "report": tag.raw_payload}
    if tag.truncated:
        args["truncated"] = True
    return ToolCall(tag.slot or "FINAL", FINAL_REPORT_TOOL, args, "xml", tag.slot or None)


def merge_native_calls(native: Sequence[ToolCall], parsed: SlotParse) -> list[ToolCall]:
    """The calls to run this turn, final report last (seed 001 execution flow).

    ``xml-final`` keeps the native tool calls and adds the XML final report;
    ``xml`` ignores native calls (the provider was shown no tools) and uses the tags.
    """
    calls = list(native) if parsed.mode == "xml-final" else list(parsed.calls)
    if parsed.final is not None:
        calls.append(final_report_call(parsed.final))
    return calls


# ------------------------------------------------------------------ the scan


def _attributes(text: str) -> dict[str, str] | None:
    """Attribute values by name, or None when a name repeats (ambiguous: rejected)."""
    attrs: dict[str, str] = {}
    for name, dq, sq in _ATTR_RE.findall(text):
        if name in attrs:
            return None
        attrs[name] = (dq or sq).strip()
    return attrs


class _Scan:
    """The tags of one reply, judged in text order; remembers the slots and FINAL used."""

    def __init__(
        self,
        text: str,
        nonce: str,
        allowed_tools: Collection[str] | None,
        slots: Collection[str] | None,
        mode: str,
    ) -> None:
        self.text = text
        self.nonce = nonce
        self.mode = mode
        self._own = nonce + "-"
        # None: any tool / any numbered slot (``toolwire parse`` without a spec checks the
        # wire format only).
        self._allowed = None if allowed_tools is None else frozenset(allowed_tools)
        self._tools_shown = ", ".join(sorted(self._allowed or ())) or "(none)"
        self._slots = None if slots is None else frozenset(slots)
        self._lines = Lines(text)
        self._last: InvalidTag | None = None
        self._used: set[str] = set()
        self.calls: list[ToolCall] = []
        self.final: FinalTag | None = None
        self.progress: str | None = None  # the last progress note wins
        self.invalid: list[InvalidTag] = []
        self.notes: list[str] = []  # e.g. an unclosed <think>: told to the model, not a tag

    def run(self, finish_reason: str) -> None:
        """Every tag, in text order; whatever is still open at the end is judged (an
        unclosed FINAL by ``finish_reason``). Each search starts past the last one's hit, and
        a tag's closing tag is looked up, not searched for: linear in the reply."""
        text = self.text
        closes: dict[str, list[int]] = {}  # where each name's closing tags start
        for m in _CLOSE_RE.finditer(text):
            closes.setdefault(m.group(1), []).append(m.start())
        last_gt = text.rfind(">")
        pos = 0
        while (hit := _NEXT_RE.search(text, pos)) is not None:
            lt = hit.start()
            if hit.group() == THINK_OPEN:
                # Reasoning is not protocol text (upstream fixed this too): a tag the model
                # mentions while thinking is neither run nor reported.
                think_end = text.find(THINK_CLOSE, hit.end())
                if think_end < 0:
                    line, col = self._lines.at(lt)
                    self.notes.append(
                        f"line {line}, column {col}: UNCLOSED_THINK: the <think> block is never "
                        "closed, so the rest of the reply was read as reasoning: close it with "
                        "</think> before writing tags."
                    )
                    return
                pos = think_end + len(THINK_CLOSE)
                continue
            tag = _OPEN_RE.match(text, lt)
            attrs = None if tag is None else _attributes(tag.group(2))
            if tag is None or attrs is None:
                named = _NAME_RE.match(text, lt + 1)
                name = named.group() if named is not None else None
                if lt > last_gt:  # no ">" follows: the opening tag is cut off
                    cut = " by the output limit" if finish_reason == "length" else ""
                    detail = DETAILS["UNCLOSED_OPEN_TAG"].format(cut=cut)
                    self._refuse(lt, "UNCLOSED_TAG", name, None, detail)
                    return
                self._refuse(lt, "MALFORMED_TAG", name, None, DETAILS["MALFORMED_TAG"])
                pos = lt + 1
                continue
            name, gt = tag.group(1), tag.end() - 1
            found = closes.get(name, [])
            k = bisect_left(found, gt + 1)
            # A self-closing tag has no content. Seed 001 skips a tag with another nonce;
            # skipping its opening tag only (it never closes) keeps what follows, the real
            # FINAL included.
            if tag.group(3) or (k == len(found) and not name.startswith(self._own)):
                self._judge(lt, name, attrs, "", False, finish_reason)
                pos = gt + 1
            elif k < len(found):
                self._judge(lt, name, attrs, text[gt + 1 : found[k]], False, finish_reason)
                pos = text.index(">", found[k]) + 1
            else:
                self._judge(lt, name, attrs, text[gt + 1 :], True, finish_reason)
                return

    def _refuse(
        self, lt: int, code: str, slot: str | None, tool: str | None, detail: str,
        content: str = "",
    ) -> InvalidTag:  # fmt: skip
        line, col = self._lines.at(lt)
        size = len(content.encode("utf-8", "surrogatepass")) if content else 0
        # A reply of many refused tags repeats one tag: share the last tag's strings, so
        # each refusal costs its InvalidTag, not three fresh strings (9x the input, was).
        last = self._last
        if last is not None:
            slot = last.slot if slot == last.slot else slot
            tool = last.tool if tool == last.tool else tool
            detail = last.detail if detail == last.detail else detail
        self._last = InvalidTag(code, slot, tool, detail, line, col, size)
        self.invalid.append(self._last)
        return self._last

    def _judge(
        self, lt: int, name: str, attrs: dict[str, str], content: str, unclosed: bool,
        finish_reason: str,
    ) -> InvalidTag | None:  # fmt: skip
        """One complete (or, at the end, unclosed) tag: kept as a call, FINAL or PROGRESS,
        or refused (the refusal is returned)."""

        def bad(code: str, called: str | None, key: str = "", **values: str) -> InvalidTag:
            detail = DETAILS[key or code].format(name=name, **values)
            return self._refuse(lt, code, name, called, detail, content)

        tool = attrs.get("tool")
        if not name.startswith(self._own):
            return bad("WRONG_NONCE", tool, nonce=self.nonce)
        if name == final_slot(self.nonce):
            status, fmt = attrs.get("status"), attrs.get("format")
            if self.final is not None:
                return bad("DUPLICATE_FINAL", FINAL_REPORT_TOOL)
            if status not in FINAL_STATUSES:
                shown = f'"{status}"' if status else "missing"
                return bad("INVALID_FINAL_STATUS", FINAL_REPORT_TOOL, status=shown)
            if not fmt:
                return bad("MISSING_FINAL_FORMAT", FINAL_REPORT_TOOL)
            if fmt not in REPORT_FORMATS:
                return bad("UNKNOWN_FINAL_FORMAT", FINAL_REPORT_TOOL, format=fmt)
            truncated = unclosed and finish_reason == "length"
            if truncated and fmt in TRUNCATION_REJECTED:
                return bad("FINAL_TRUNCATED", FINAL_REPORT_TOOL, format=fmt)
            if not content.strip():
                return bad("EMPTY_CONTENT", FINAL_REPORT_TOOL, "EMPTY_FINAL")
            self.final = FinalTag(status, fmt, content, truncated, name)
            return None
        progress = name == progress_slot(self.nonce)
        if self.mode == "xml-final":
            return bad("NON_FINAL_TAG_IN_XML_FINAL", PROGRESS_TOOL if progress else tool)
        if progress:
            if unclosed:
                return bad("UNCLOSED_TAG", PROGRESS_TOOL)
            if not content.strip():
                return bad("EMPTY_CONTENT", PROGRESS_TOOL, "EMPTY_PROGRESS")
            self.progress = content.strip()
            return None
        suffix = name[len(self._own) :]
        if name not in self._slots if self._slots is not None else not _ANY_SLOT_RE.match(suffix):
            return bad("UNDECLARED_SLOT", tool)
        if name in self._used:
            return bad("DUPLICATE_SLOT", tool)
        if not tool:
            return bad("MISSING_TOOL_ATTRIBUTE", None)
        if self._allowed is not None and tool not in self._allowed:
            return bad("TOOL_NOT_ALLOWED", tool, tool=tool, tools=self._tools_shown)
        if unclosed:
            return bad("UNCLOSED_TAG", tool)
        if not content.strip():
            return bad("EMPTY_CONTENT", tool)
        try:
            args = parse_tool_args(content)
        except ProtocolError as exc:
            return bad(INVALID_JSON_ARGS, tool, reason=exc.message)
        self._used.add(name)
        self.calls.append(ToolCall(id=name, tool=tool, args=args, source="xml", slot=name))
        return None
