"""Inputs for figure 1's slot (seed 001) and execute (seed 000) parsers.

Each ``*_cases`` function takes the parser and returns ``Case``s: a text, a
call that parses it, and its floor, a ``str.find`` loop that slices out the
same tags' contents and checks nothing (no nonce, slot, tool, schema or JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

__all__ = ["Case", "execute_cases", "scan_elements", "slot_cases"]

SIZES = (1, 10, 50)
NONCE = "ai-agent-1a2b3c4d"
_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "write_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "search_text": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
        "required": ["query"],
    },
}


@dataclass(frozen=True)
class Case:
    label: str
    size: int  # bytes of the text (UTF-8)
    parse: Callable[[], Any]
    scan: Callable[[], Any]


def _args(i: int) -> tuple[str, dict[str, Any]]:
    tool = ("read_file", "write_file", "search_text")[i % 3]
    by_tool: dict[str, dict[str, Any]] = {
        "read_file": {"path": f"notes/tech/databases/note-{i:03d}.md"},
        "write_file": {
            "path": f"notes/inbox/summary-{i:03d}.md",
            "content": "# Summary\n\nVACUUM reclaims dead tuples; tune autovacuum per table.\n",
        },
        "search_text": {"query": f"autovacuum threshold {i}", "max_results": 5},
    }
    return tool, by_tool[tool]


def scan_elements(text: str, start: int = 0, end: int | None = None) -> list[tuple[str, int, int]]:
    """(name, content start, content end) of each top-level ``<name>...</name>`` in a span."""
    end = len(text) if end is None else end
    found: list[tuple[str, int, int]] = []
    find = text.find
    pos = start
    while True:
        lt = find("<", pos, end)
        if lt < 0:
            return found
        gt = find(">", lt, end)
        if gt < 0:
            return found
        name = text[lt + 1 : gt]
        close = find(f"</{name}>", gt, end)
        if close < 0:
            return found
        found.append((name, gt + 1, close))
        pos = close + len(name) + 3


def slot_cases(parser: Callable[..., Any]) -> list[Case]:
    import json

    cases = []
    for n in SIZES:
        parts = []
        for i in range(n):
            tool, args = _args(i)
            slot = f"{NONCE}-{i + 1:04d}"
            parts.append(f'<{slot} tool="{tool}">{json.dumps(args)}</{slot}>')
        parts.append(f'<{NONCE}-FINAL status="success" format="text">Done.</{NONCE}-FINAL>')
        text = "\n".join(parts) + "\n"
        slots = [f"{NONCE}-{i + 1:04d}" for i in range(n)]
        kwargs = {"nonce": NONCE, "allowed_tools": set(_SCHEMAS), "slots": slots, "mode": "xml"}
        parsed = parser(text, **kwargs)
        if len(parsed.calls) != n or parsed.final is None or parsed.invalid:
            raise RuntimeError(f"slot input with {n} calls did not parse cleanly: {parsed}")
        cases.append(
            Case(
                f"{n} call{'s' if n > 1 else ''} + FINAL",
                len(text.encode("utf-8")),
                partial(parser, text, **kwargs),
                partial(_scan_prefixed, text, f"<{NONCE}-", f"</{NONCE}-"),
            )
        )
    return cases


def _scan_prefixed(text: str, open_prefix: str, close: str) -> list[str]:
    found: list[str] = []
    find = text.find
    pos = 0
    while True:
        start = find(open_prefix, pos)
        if start < 0:
            return found
        gt = find(">", start)
        stop = find(close, gt)
        if gt < 0 or stop < 0:
            return found
        found.append(text[gt + 1 : stop])
        pos = find(">", stop) + 1


def execute_cases(parser: Callable[..., Any]) -> list[Case]:
    from toolwire.domain import ToolCall
    from toolwire.protocols.execute import render_execute

    cases = []
    for n in SIZES:
        calls = [ToolCall(f"c{i}", *_args(i), source="xml") for i in range(n)]
        text = render_execute(calls, think="Read the notes, then write the summary.")
        parsed = parser(text, tools=_SCHEMAS)
        if len(parsed.calls) != n:
            raise RuntimeError(f"execute input with {n} calls gave {len(parsed.calls)} calls")

        def floor(text: str = text) -> list[list[tuple[str, int, int]]]:
            block = text.find("<execute>")
            stop = text.find("</execute>", block)
            return [
                scan_elements(text, a, b)
                for _, a, b in scan_elements(text, block + len("<execute>"), stop)
            ]

        cases.append(
            Case(
                f"{n} call{'s' if n > 1 else ''} in element form",
                len(text.encode("utf-8")),
                partial(parser, text, tools=_SCHEMAS),
                floor,
            )
        )
    return cases
