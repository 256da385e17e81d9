"""Tool calls a model wrote as text instead of sending them as native tool calls.

Models served without native tool support, or through a mis-matched chat
template, print the call their training taught them. Five shapes are common:

- ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes, Qwen);
  the closing tag is often missing when the server stops on it;
- ``<tool_calls>[{...}, ...]</tool_calls>`` (Hermes variants, Mistral-style lists);
- ``<tools>{...}</tools>`` or a list in it;
- ``<function_call>{...}</function_call>`` (OpenAI's legacy name);
- ``<invoke name="tool"><parameter name="arg">value</parameter></invoke>``,
  usually inside ``<function_calls>`` (Anthropic's XML).

``find_leaked_calls`` returns every call found, in text order, and every block
that looks like one but cannot be read (so the model can be told, instead of
the block becoming the run's answer). A JSON call object may name its fields
``name``/``tool`` and ``arguments``/``parameters``/``args``, may nest them under
``function`` (OpenAI's shape), and may give the arguments as a JSON string.
``<invoke>`` parameter values are text (callers convert them by schema).
Reasoning inside ``<think>`` is skipped: a call the model only considered is
not a call.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from toolwire.protocols.text import (
    THINK_OPEN,
    Lines,
    loads_strict,
    lone_surrogate,
    think_spans,
)

__all__ = ["LEAKED_CALL_INVALID", "LeakedCall", "LeakedScan", "find_leaked_calls"]

LEAKED_CALL_INVALID = "LEAKED_CALL_INVALID"

_JSON_BLOCK_RE = re.compile(r"<(tool_calls|tool_call|tools|function_call)>")
# Opening and closing tags are found apart: one pattern "<invoke ...>(.*?)</invoke>" would
# scan to the end of the text for every unclosed <invoke> (quadratic on hostile text).
_INVOKE_OPEN_RE = re.compile(r"<invoke\s+name\s*=\s*[\"']([^\"'<>]+)[\"']\s*>")
_INVOKE_CLOSE_RE = re.compile(r"</invoke\s*>")
_PARAM_RE = re.compile(
    r"\s*<parameter\s+name\s*=\s*[\"']([^\"'<>]+)[\"']\s*>(.*?)</parameter\s*>\s*", re.S
)
_NAME_KEYS = ("name", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")


@dataclass(frozen=True, slots=True)
class LeakedCall:
    tool: str
    args: dict[str, Any]
    shape: str  # the tag it was found in: tool_call, tool_calls, tools, function_call, invoke
    line: int
    column: int
    args_as_text: bool = False  # <invoke> parameters: text values, to convert by schema


@dataclass
class LeakedScan:
    calls: list[LeakedCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "line L, column C: <shape>: why"

    @property
    def found(self) -> bool:
        return bool(self.calls or self.problems)


def _in_spans(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Is ``pos`` inside one of ``spans`` (sorted, disjoint)?"""
    i = bisect_right(spans, pos, key=lambda span: span[0]) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def _call_from_object(obj: Any) -> tuple[str, dict[str, Any]] | str:
    """(tool, args) of one JSON call object, or why it is not one."""
    if not isinstance(obj, dict):
        return "a call must be a JSON object with a name and arguments"
    inner = obj.get("function")
    if isinstance(inner, dict):  # OpenAI: {"type": "function", "function": {...}}
        obj = inner
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if not name:
        return 'the call has no "name"'
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    if isinstance(args, str):  # OpenAI sends arguments as a JSON string
        try:
            args = loads_strict(args) if args.strip() else {}
        except (ValueError, RecursionError):
            return f'the arguments of "{name}" are a string that is not a JSON object'
    if not isinstance(args, dict):
        return f'the arguments of "{name}" are not a JSON object'
    return name, args


def _json_block(text: str, m: re.Match[str], line: int, col: int, scan: LeakedScan) -> None:
    """Read one JSON-bodied block (to its closing tag, or to the end if it has none)."""
    shape = m.group(1)
    close = f"</{shape}>"
    end = text.find(close, m.end())
    body_end = len(text) if end < 0 else end  # a server stopping on </tool_call> drops it
    body = text[m.end() : body_end].strip()
    where = f"line {line}, column {col}: <{shape}>"
    try:
        value = loads_strict(body)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "too deep"
        scan.problems.append(f"{where}: the content is not JSON ({reason})")
        return
    if lone_surrogate(value, body):
        scan.problems.append(f"{where}: the content holds an unpaired surrogate escape")
    else:
        for obj in value if isinstance(value, list) else [value]:
            got = _call_from_object(obj)
            if isinstance(got, str):
                scan.problems.append(f"{where}: {got}")
            else:
                scan.calls.append(LeakedCall(got[0], got[1], shape, line, col))


def _invokes(text: str) -> list[tuple[int, str, str]]:
    """(position, tool name, body) of each closed ``<invoke>``, in order."""
    found = []
    pos = 0
    while (m := _INVOKE_OPEN_RE.search(text, pos)) is not None:
        close = _INVOKE_CLOSE_RE.search(text, m.end())
        if close is None:
            break  # no <invoke> from here on is ever closed
        found.append((m.start(), m.group(1), text[m.end() : close.start()]))
        pos = close.end()
    return found


def _invoke_block(line: int, col: int, name: str, body: str, scan: LeakedScan) -> None:
    pos, args = 0, {}
    while pos < len(body.rstrip()):
        p = _PARAM_RE.match(body, pos)
        if p is None:
            scan.problems.append(
                f"line {line}, column {col}: <invoke>: write only "
                '<parameter name="...">value</parameter> elements inside it'
            )
            return
        args[p.group(1)] = p.group(2)
        pos = p.end()
    scan.calls.append(LeakedCall(name.strip(), args, "invoke", line, col, True))


def find_leaked_calls(text: str) -> LeakedScan:
    """Every tool call written as text, in order, and every call-like block that is unreadable."""
    scan = LeakedScan()
    if "<" not in text:
        return scan
    thinks = think_spans(text) if THINK_OPEN in text else []
    found: list[tuple[int, tuple[str, str] | re.Match[str]]] = [
        (start, (name, body))
        for start, name, body in _invokes(text)
        if not _in_spans(start, thinks)
    ]
    pos = 0
    while (block := _JSON_BLOCK_RE.search(text, pos)) is not None:
        if _in_spans(block.start(), thinks):
            pos = block.end()
            continue
        found.append((block.start(), block))
        close = text.find(f"</{block.group(1)}>", block.end())
        pos = len(text) if close < 0 else close
    lines = Lines(text)
    for start, item in sorted(found, key=lambda entry: entry[0]):
        line, col = lines.at(start)
        if isinstance(item, tuple):
            _invoke_block(line, col, item[0], item[1], scan)
        else:
            _json_block(text, item, line, col, scan)
    return scan
