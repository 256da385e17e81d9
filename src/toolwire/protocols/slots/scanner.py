"""Substring scanner for seed 001's nonce/slot tags.

The implementation the seed comes from scans for ``<ai-agent-`` by substring
and reads the ``tool=``/``status=``/``format=`` attributes. ``SlotScanner.scan``
does exactly that with ``str.find`` and one anchored regex per tag: no
per-character Python work, linear in the reply.

A tag's content runs to its own closing tag, and a tag of this session that
never closes swallows the rest of the text. Markup inside the content (even
another ``<ai-agent-`` tag) is content.
A tag with another nonce that never closes is skipped as its opening tag
alone (seed 001 skips such tags; skipping must not eat the real ones after it).
``<think>...</think>`` blocks are reasoning, not protocol text: tags mentioned
in them are neither run nor reported; an unclosed ``<think>`` makes the rest
of the reply reasoning, and says so in ``notes``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
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
    DUPLICATE_FINAL,
    DUPLICATE_SLOT,
    EMPTY_CONTENT,
    FINAL_SUFFIX,
    FINAL_TRUNCATED,
    INVALID_FINAL_STATUS,
    INVALID_JSON_ARGS,
    MALFORMED_TAG,
    MISSING_FINAL_FORMAT,
    MISSING_TOOL_ATTRIBUTE,
    MODES,
    NON_FINAL_TAG_IN_XML_FINAL,
    PROGRESS_SUFFIX,
    PROGRESS_TOOL,
    TAG_PREFIX,
    TOOL_NOT_ALLOWED,
    UNCLOSED_TAG,
    UNDECLARED_SLOT,
    UNKNOWN_FINAL_FORMAT,
    WRONG_NONCE,
    InvalidTag,
    Item,
    ProgressTag,
)
from toolwire.protocols.text import (
    THINK_CLOSE,
    THINK_OPEN,
    Lines,
    line_column,
    loads_strict,
    lone_surrogate,
)
from toolwire.stop_reasons import normalize_finish_reason

__all__ = ["SlotScanner", "parse_tool_args"]

_WS = "[ \t\r\n]"
# The opening tag, matched over exactly "<" .. first ">" (possessive: no backtracking).
_OPEN_RE = re.compile(
    rf"<(ai-agent-[A-Za-z0-9_-]*+)"
    rf"((?:{_WS}++[A-Za-z_][A-Za-z0-9_.:-]*+{_WS}*+={_WS}*+(?:\"[^\"<>]*+\"|'[^'<>]*+'))*+)"
    rf"{_WS}*+(/?)>"
)
_ATTR_RE = re.compile(rf"([A-Za-z_][A-Za-z0-9_.:-]*+){_WS}*+={_WS}*+(?:\"([^\"]*+)\"|'([^']*+)')")
_NAME_RE = re.compile(r"ai-agent-[A-Za-z0-9_-]*+")
_CLOSE_END_RE = re.compile(rf"{_WS}*+>")
_ANY_SLOT_RE = re.compile(r"[0-9]{4}\Z")
_CLOSE_NAME_RE = re.compile(r"</(ai-agent-[A-Za-z0-9_-]*+)")


def _last_closes(text: str) -> dict[str, int]:
    """Where each tag name's last closing tag starts. Once one tag is found never to close,
    every later unclosed tag would search the rest of the text again (quadratic on a
    hostile reply of many); with this, a search that cannot succeed is skipped."""
    return {m.group(1): m.start() for m in _CLOSE_NAME_RE.finditer(text)}


# ------------------------------------------------------------------ JSON


def _json_type(value: Any) -> str:
    kinds = ((bool, "boolean"), (int | float, "number"), (str, "string"), (list, "array"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def parse_tool_args(raw: str) -> dict[str, Any]:
    """The arguments of one tool call: exactly one JSON object.

    Raises ``ProtocolError(INVALID_JSON_ARGS)`` with a detail code (``EMPTY``,
    ``JSON_SYNTAX``, ``JSON_VALUE``, ``NOT_AN_OBJECT``, ``INVALID_CHARACTER``);
    line and column, when given, are inside ``raw``.
    """
    text = raw.strip()
    if not text:
        raise ProtocolError(
            INVALID_JSON_ARGS, "The arguments are empty: write one JSON object.", details=["EMPTY"]
        )
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as exc:
        lead = len(raw) - len(raw.lstrip())
        line, col = line_column(raw, lead + exc.pos)
        raise ProtocolError(
            INVALID_JSON_ARGS,
            f"The arguments are not valid JSON ({exc.msg}, at line {line}, column {col} of the "
            "arguments): write one JSON object.",
            line,
            col,
            ["JSON_SYNTAX"],
        ) from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ProtocolError(
            INVALID_JSON_ARGS,
            f"The arguments are not valid JSON ({reason}): write one JSON object.",
            details=["JSON_VALUE"],
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(
            INVALID_JSON_ARGS,
            f"The arguments are a JSON {_json_type(value)}, not an object: write "
            '{"name": value, ...}.',
            details=["NOT_AN_OBJECT"],
        )
    if lone_surrogate(value, text):
        raise ProtocolError(
            INVALID_JSON_ARGS,
            "The arguments contain an unpaired surrogate escape (\\ud800-\\udfff): remove it.",
            details=["INVALID_CHARACTER"],
        )
    return value


# ------------------------------------------------------------------ scanner


def _attributes(text: str) -> dict[str, str] | None:
    """Attribute values by name, or None when a name repeats (ambiguous: rejected)."""
    attrs: dict[str, str] = {}
    for name, dq, sq in _ATTR_RE.findall(text):
        if name in attrs:
            return None
        attrs[name] = (dq or sq).strip()
    return attrs


class SlotScanner:
    """Finds the tags of one model reply; remembers slots and FINAL already used in it."""

    def __init__(
        self,
        nonce: str,
        allowed_tools: Collection[str] | None,
        slots: Collection[str] | None,
        mode: str,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.nonce = nonce
        self.mode = mode
        self._own = nonce + "-"
        # None: any tool / any numbered slot (``toolwire parse`` without a spec checks the
        # wire format only).
        self._allowed = None if allowed_tools is None else frozenset(allowed_tools)
        self._tools_shown = ", ".join(sorted(self._allowed or ())) or "(none)"
        self._slots = None if slots is None else frozenset(slots)
        self._used: set[str] = set()
        self._final_done = False
        self._lines = Lines("")
        self._last: InvalidTag | None = None
        self.notes: list[str] = []  # e.g. an unclosed <think>: told to the model, not a tag

    def scan(self, text: str, finish_reason: str = "stop") -> list[Item]:
        """Items of every tag in ``text``, in text order; whatever is still open at the end
        is judged (an unclosed FINAL by ``finish_reason``)."""
        self._lines = Lines(text)
        if finish_reason != "stop":  # providers name a cut reply length, max_tokens, MAX_TOKENS
            finish_reason = normalize_finish_reason(finish_reason)
        return self._scan(text, finish_reason)

    def _scan(self, text: str, finish_reason: str) -> list[Item]:
        items: list[Item] = []
        pos = 0
        last_gt = -1  # the ">" found for the previous tag: reused while still ahead
        last_close: dict[str, int] | None = None  # built at the first tag that never closes
        think = text.find(THINK_OPEN)
        while True:
            lt = text.find(TAG_PREFIX, pos)
            if 0 <= think < pos:
                think = text.find(THINK_OPEN, pos)
            if think >= 0 and (lt < 0 or think < lt):
                # Reasoning is not protocol text (upstream fixed this too): a tag the model
                # mentions while thinking is neither run nor reported.
                think_end = text.find(THINK_CLOSE, think + len(THINK_OPEN))
                if think_end < 0:
                    line, col = self._lines.at(think)
                    self.notes.append(
                        f"line {line}, column {col}: UNCLOSED_THINK: the <think> block is never "
                        "closed, so the rest of the reply was read as reasoning: close it with "
                        "</think> before writing tags."
                    )
                    return items
                pos = think_end + len(THINK_CLOSE)
                continue
            if lt < 0:
                return items
            # no ">" lies between the previous "<" and last_gt
            gt = last_gt if last_gt > lt else text.find(">", lt + 1)
            last_gt = gt
            if gt < 0:
                items.append(self._cut_open_tag(text, lt, finish_reason))
                return items
            m = _OPEN_RE.fullmatch(text, lt, gt + 1)
            attrs = None if m is None else _attributes(m.group(2)) if m.group(2) else {}
            if m is None or attrs is None:
                items.append(self._malformed(text, lt))
                pos = lt + 1
                continue
            name, self_closing = m.group(1), m.group(3)
            if self_closing:  # a tag with no content
                items.append(self._judge(lt, name, attrs, "", False, finish_reason))
                pos = gt + 1
                continue
            close = "</" + name
            search = gt + 1
            end = -1
            while True:
                if last_close is not None and last_close.get(name, -1) < search:
                    i = -1  # no "</name" from here on (see _last_closes)
                else:
                    i = text.find(close, search)
                if i < 0:
                    if last_close is None:
                        last_close = _last_closes(text)
                    break
                j = i + len(close)
                if text.startswith(">", j):  # the usual "</name>", without the regex
                    end = j + 1
                    break
                tail = _CLOSE_END_RE.match(text, j)
                if tail is not None:
                    end = tail.end()
                    break
                search = i + 1
            if end < 0:
                if not name.startswith(self._own):
                    # Seed 001 skips a tag with another nonce; skipping its opening tag
                    # only (it never closes) keeps what follows, the real FINAL included.
                    items.append(self._judge(lt, name, attrs, "", False, "stop"))
                    pos = gt + 1
                    continue
                content = text[gt + 1 :]
                items.append(self._judge(lt, name, attrs, content, True, finish_reason))
                return items
            content = text[gt + 1 : i]
            items.append(self._judge(lt, name, attrs, content, False, finish_reason))
            pos = end

    # -------------------------------------------------------------- verdicts

    def _invalid(
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
        return self._last

    def _malformed(self, text: str, lt: int) -> InvalidTag:
        m = _NAME_RE.match(text, lt + 1)
        name = m.group() if m is not None else None
        return self._invalid(lt, MALFORMED_TAG, name, None, DETAILS[MALFORMED_TAG])

    def _cut_open_tag(self, text: str, lt: int, finish_reason: str) -> InvalidTag:
        m = _NAME_RE.match(text, lt + 1)
        name = m.group() if m is not None else None
        cut = " by the output limit" if finish_reason == "length" else ""
        detail = DETAILS["UNCLOSED_OPEN_TAG"].format(cut=cut)
        return self._invalid(lt, UNCLOSED_TAG, name, None, detail)

    def _judge(
        self, lt: int, name: str, attrs: dict[str, str], content: str, unclosed: bool,
        finish_reason: str,
    ) -> Item:  # fmt: skip
        """One complete (or, at the end, unclosed) tag -> a call, FINAL, PROGRESS or invalid."""

        def bad(code: str, called: str | None, key: str | None = None, **values: str) -> InvalidTag:
            detail = DETAILS[key or code].format(name=name, **values)
            return self._invalid(lt, code, name, called, detail, content)

        if not name.startswith(self._own):
            return bad(WRONG_NONCE, attrs.get("tool"), nonce=self.nonce)
        suffix = name[len(self._own) :]
        if suffix == FINAL_SUFFIX:
            return self._judge_final(name, attrs, content, unclosed, finish_reason, bad)
        if self.mode == "xml-final":
            tool = PROGRESS_TOOL if suffix == PROGRESS_SUFFIX else attrs.get("tool")
            return bad(NON_FINAL_TAG_IN_XML_FINAL, tool)
        if suffix == PROGRESS_SUFFIX:
            if unclosed:
                return bad(UNCLOSED_TAG, PROGRESS_TOOL)
            if not content.strip():
                return bad(EMPTY_CONTENT, PROGRESS_TOOL, "EMPTY_PROGRESS")
            return ProgressTag(content.strip(), name)
        tool = attrs.get("tool")
        if name not in self._slots if self._slots is not None else not _ANY_SLOT_RE.match(suffix):
            return bad(UNDECLARED_SLOT, tool)
        if name in self._used:
            return bad(DUPLICATE_SLOT, tool)
        if not tool:
            return bad(MISSING_TOOL_ATTRIBUTE, None)
        if self._allowed is not None and tool not in self._allowed:
            return bad(TOOL_NOT_ALLOWED, tool, tool=tool, tools=self._tools_shown)
        if unclosed:
            return bad(UNCLOSED_TAG, tool)
        if not content.strip():
            return bad(EMPTY_CONTENT, tool)
        try:
            args = parse_tool_args(content)
        except ProtocolError as exc:
            return bad(INVALID_JSON_ARGS, tool, reason=exc.message)
        self._used.add(name)
        return ToolCall(id=name, tool=tool, args=args, source="xml", slot=name)

    def _judge_final(
        self, name: str, attrs: dict[str, str], content: str, unclosed: bool,
        finish_reason: str, bad: Callable[..., InvalidTag],
    ) -> Item:  # fmt: skip
        tool = FINAL_REPORT_TOOL
        if self._final_done:
            return bad(DUPLICATE_FINAL, tool)
        status = attrs.get("status")
        if status not in FINAL_STATUSES:
            return bad(INVALID_FINAL_STATUS, tool, status=f'"{status}"' if status else "missing")
        fmt = attrs.get("format")
        if not fmt:
            return bad(MISSING_FINAL_FORMAT, tool)
        if fmt not in REPORT_FORMATS:
            return bad(UNKNOWN_FINAL_FORMAT, tool, format=fmt)
        truncated = unclosed and finish_reason == "length"
        if truncated and fmt in TRUNCATION_REJECTED:
            return bad(FINAL_TRUNCATED, tool, format=fmt)
        if not content.strip():
            return bad(EMPTY_CONTENT, tool, "EMPTY_FINAL")
        self._final_done = True
        return FinalTag(status, fmt, content, truncated, name)
