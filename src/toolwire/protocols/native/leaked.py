"""Tool calls a model writes as text, and their grammar when the tools travel in the prompt
(``prompt_tools``). A model served without native tool support, or through a mis-matched
chat template, prints the call its training taught it. Five shapes are common:

- ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes, Qwen);
  the closing tag is often missing when the server stops on it;
- ``<tool_calls>[{...}, ...]</tool_calls>`` (Hermes variants, Mistral-style lists);
- ``<tools>{...}</tools>`` or a list in it;
- ``<function_call>{...}</function_call>`` (OpenAI's legacy name);
- ``<invoke name="tool"><parameter name="arg">value</parameter></invoke>``,
  usually inside ``<function_calls>`` (Anthropic's XML).

Reasoning inside ``<think>`` is skipped: a call the model only considered is not a call.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire import gbnf
from toolwire.protocols.slots.grammar import final_tag_rule
from toolwire.protocols.text import Lines, loads_strict, lone_surrogate, think_spans

__all__ = [
    "LEAKED_CALL_INVALID",
    "LeakedCall",
    "LeakedScan",
    "find_leaked_calls",
    "tool_call_grammar",
]

LEAKED_CALL_INVALID = "LEAKED_CALL_INVALID"

_JSON_BLOCK_RE = re.compile(r"<(tool_calls|tool_call|tools|function_call)>")
# Opening and closing tags are found apart: one pattern "<invoke ...>(.*?)</invoke>" would
# scan to the end of the text for every unclosed <invoke> (quadratic on hostile text).
_INVOKE_OPEN_RE = re.compile(r"<invoke\s+name\s*=\s*[\"']([^\"'<>]+)[\"']\s*>")
_INVOKE_CLOSE_RE = re.compile(r"</invoke\s*>")
_PARAM_RE = re.compile(
    r"\s*<parameter\s+name\s*=\s*[\"']([^\"'<>]+)[\"']\s*>(.*?)</parameter\s*>\s*", re.S
)
# A JSON call names its fields as the model's training did; OpenAI nests them in "function".
_NAME_KEYS = ("name", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")

_Found = tuple[str, dict[str, Any]] | str  # (tool, arguments) of one call, or why it is none


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


def _call_from_object(obj: Any) -> _Found:
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


def _json_calls(body: str) -> list[_Found]:
    """The calls in a JSON block: one call object or a list of them."""
    try:
        value = loads_strict(body)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "too deep"
        return [f"the content is not JSON ({reason})"]
    if lone_surrogate(value, body):
        return ["the content holds an unpaired surrogate escape"]
    return [_call_from_object(obj) for obj in (value if isinstance(value, list) else [value])]


def _invoke_call(name: str, body: str) -> _Found:
    pos, end, args = 0, len(body.rstrip()), {}
    while pos < end:
        p = _PARAM_RE.match(body, pos)
        if p is None:
            return 'write only <parameter name="...">value</parameter> elements inside it'
        args[p.group(1)] = p.group(2)
        pos = p.end()
    return name.strip(), args


def find_leaked_calls(text: str) -> LeakedScan:
    """Every tool call written as text, in order, and every call-like block that cannot be
    read (so the model is told, instead of the block becoming the run's answer)."""
    scan = LeakedScan()
    thinks = think_spans(text)
    blocks: list[tuple[int, str, list[_Found]]] = []  # (position, shape, what it holds)
    pos = 0
    while (m := _INVOKE_OPEN_RE.search(text, pos)) is not None:
        close = _INVOKE_CLOSE_RE.search(text, m.end())
        end = len(text) if close is None else close.start()  # a server stopping on </invoke>
        if not _in_spans(m.start(), thinks):
            blocks.append((m.start(), "invoke", [_invoke_call(m.group(1), text[m.end() : end])]))
        if close is None:
            break  # the rest was its body: no <invoke> after it is ever closed
        pos = close.end()
    pos = 0
    while (m := _JSON_BLOCK_RE.search(text, pos)) is not None:
        if _in_spans(m.start(), thinks):
            pos = m.end()
            continue
        end = text.find(f"</{m.group(1)}>", m.end())
        pos = len(text) if end < 0 else end  # a server stopping on </tool_call> drops it
        blocks.append((m.start(), m.group(1), _json_calls(text[m.end() : pos].strip())))
    lines = Lines(text)
    for start, shape, found in sorted(blocks, key=lambda block: block[0]):
        line, col = lines.at(start)
        for got in found:
            if isinstance(got, str):
                scan.problems.append(f"line {line}, column {col}: <{shape}>: {got}")
            else:
                scan.calls.append(LeakedCall(*got, shape, line, col, shape == "invoke"))
    return scan


def tool_call_grammar(
    tools: Sequence[Any],
    *,
    max_calls: int = 1,
    final_nonce: str | None = None,
    final_format: str = "text",
    ending: bool = True,
) -> str:
    """The GBNF of a turn with ``tools`` in the prompt: one to ``max_calls`` elements
    ``<tool_call>{"name": NAME, "arguments": ARGS}</tool_call>`` (the shape
    ``find_leaked_calls`` reads first), or the turn's end: a plain-text answer
    (``native``) or the FINAL tag (``xml-final``, ``final_nonce`` set)."""
    rules = gbnf.Rules()
    calls = []
    for tool in tools:
        args = gbnf.json_args_rule(rules, tool)
        head = gbnf.gbnf_literal('<tool_call>\n{"name": "' + tool.name + '", "arguments": ')
        tail = gbnf.gbnf_literal("}\n</tool_call>\n")
        calls.append(rules.add(gbnf.rule_name("call", tool.name), f"{head} {args} {tail}"))
    text = rules.add("final-text", gbnf.ANSWER_TEXT)
    end = text if final_nonce is None else final_tag_rule(rules, final_nonce, final_format)
    gbnf.add_json_rules(rules)
    if not calls:
        return rules.text(end)
    rules.add("call", " | ".join(calls))
    more = f" call{{0,{max_calls - 1}}}" if max_calls > 1 else ""
    # ending=False: this turn must call a tool (the agent's first turn under a grammar).
    return rules.text(f"call{more} | {end}" if ending else f"call{more}")
