"""The ``execute`` transport (seed 000): ``<think>`` / ``<execute>`` / ``<results>``.

The model writes an optional ``<think>`` (ignored), then either one ``<execute>``
block of tool calls or, with no block, its final answer. The block is read
strictly: every call's tool, argument names and values are checked before
anything runs (one ``EXECUTE_INVALID`` lists every problem), and reading stops
at the block's ``</execute>`` so the model cannot answer before it has seen the
results. Two forms are accepted inside the block: the seed's elements
(``<tool><arg>value</arg></tool>``, values as text converted by the schema's
types; markup in a value goes in CDATA or is escaped) and the JSON array
``[{"name": ..., "args": {...}}]`` the seed's framework later moved to, because
a value holding ``</execute>`` or HTML breaks element arguments.

``scanner.Scanner`` finds the structure in one pass; this module gives the
calls their meaning (tools, schemas, typed values).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolwire.arguments import arg_problems, coerce_value
from toolwire.domain import ToolCall
from toolwire.protocols import Schemas
from toolwire.protocols.execute.scanner import EXECUTE_INVALID, RawCall, Scanner
from toolwire.protocols.text import Problems, guarded, reply_text, text_has_lone_surrogate
from toolwire.stop_reasons import normalize_finish_reason

__all__ = ["ANY_TOOL", "ExecuteParse", "execute_parse_to_dict", "parse_execute"]

_EMPTY_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
_OPEN_SCHEMA: Mapping[str, Any] = {"type": "object"}


class _AnyTool(dict[str, Mapping[str, Any] | None]):
    """Every name is a tool with undeclared arguments: a wire-format check without a spec."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> Mapping[str, Any]:
        return _OPEN_SCHEMA


ANY_TOOL: Schemas = _AnyTool()


@dataclass(frozen=True, slots=True)
class ExecuteParse:
    """One turn: the calls to run in order (empty for a final answer) and what was ignored."""

    calls: list[ToolCall]
    think: str | None = None
    answer: str | None = None  # the final answer: set only when there is no <execute> block
    trailing_text_ignored: bool = False
    warnings: tuple[str, ...] = ()
    # Index just past the block's closing </execute> (None for an answer): the part of
    # the reply that was read. A regex cannot find it: </execute> may sit in a CDATA
    # value or a JSON string before the real end.
    block_end: int | None = None


def execute_parse_to_dict(parsed: ExecuteParse) -> dict[str, Any]:
    """JSON-able form (``toolwire parse``, test vectors)."""
    return {
        "calls": [
            {"id": c.id, "tool": c.tool, "args": c.args, "source": c.source} for c in parsed.calls
        ],
        "think": parsed.think,
        "answer": parsed.answer,
        "trailing_text_ignored": parsed.trailing_text_ignored,
        "warnings": list(parsed.warnings),
    }


def _arg_problems(
    args: dict[str, Any], schema: Mapping[str, Any], tool: str, index: int
) -> list[tuple[str, str]]:
    who = f"call[{index}] <{tool}>"
    return [(f"call[{index}]:{d}", line) for d, line in arg_problems(args, schema, who)]


class _Calls:
    """Checks each call the scanner found against the tools, keeps the valid ones and
    collects every problem (detail code, a line for the model, a position)."""

    def __init__(self, tools: Schemas, id_prefix: str) -> None:
        self.tools = tools
        self.id_prefix = id_prefix
        self.calls: list[ToolCall] = []
        self.problems = Problems()

    def _schema(self, name: str, index: int, pos: int) -> Mapping[str, Any] | None:
        if name in self.tools:
            return self.tools[name] or _EMPTY_SCHEMA
        known = ", ".join(self.tools) or "none"
        line = f"call[{index}]: {name!r} is not a tool; the tools are: {known}."
        self.problems.add(f"UNKNOWN_TOOL:{name}", line, pos)
        return None

    def element(self, call: RawCall) -> None:
        """An element-form call: values converted from text by their property's type."""
        index, who = call.index, f"call[{call.index}] <{call.name}>"
        schema = self._schema(call.name, index, call.pos)
        if schema is None:
            return
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        extra = schema.get("additionalProperties")
        args: dict[str, Any] = {}
        ok = True
        for name, pos, text in call.args:
            if name in args:
                ok = False
                line = f"{who}: <{name}> is given twice: give it once."
                self.problems.add(f"call[{index}]:DUPLICATE_ARG:{name}", line, pos)
                continue
            sub = props.get(name, extra)
            if text_has_lone_surrogate(text):
                # A provider's JSON decoder can hand us one ("\\ud800"): no tool, file
                # or store can encode it, so it is refused here like its JSON escape.
                ok = False
                line = f"{who}: <{name}> holds a lone surrogate: remove it."
                self.problems.add(f"call[{index}]:INVALID_CHARACTER:{name}", line, pos)
                args[name] = text  # present, so the schema check does not call it missing
                continue
            args[name] = coerce_value(text, sub) if isinstance(sub, Mapping) else text
        for detail, line in _arg_problems(args, schema, call.name, index):
            ok = False
            self.problems.add(detail, line, call.pos)
        if ok:
            self.calls.append(ToolCall(f"{self.id_prefix}-{index + 1}", call.name, args, "xml"))

    def json_item(self, item: Any, index: int, at: int) -> None:
        """One item of the JSON form, ``{"name": ..., "args": {...}}``, values as JSON typed."""
        p, who = f"call[{index}]:", f"call[{index}]"
        if not isinstance(item, dict):
            self.problems.add(
                p + "NOT_AN_OBJECT", f'{who} is not an object {{"name", "args"}}.', at
            )
            return
        problems = [
            (f"{p}UNKNOWN_KEY:{key}", f'{who} has the key "{key}": use only "name", "args".')
            for key in item
            if key not in ("name", "args")
        ]
        name, args = item.get("name"), item.get("args", {})
        if not isinstance(name, str):
            code = "MISSING_KEY" if "name" not in item else "WRONG_TYPE"
            problems.append((f"{p}{code}:name", f'{who}: "name" must be the tool name.'))
        if not isinstance(args, dict):
            problems.append((p + "WRONG_TYPE:args", f'{who}: "args" must be a JSON object.'))
        if not problems and isinstance(name, str) and isinstance(args, dict):
            schema = self._schema(name, index, at)
            if schema is not None:
                problems = _arg_problems(args, schema, name, index)
                if not problems:
                    self.calls.append(ToolCall(f"{self.id_prefix}-{index + 1}", name, args, "json"))
        for detail, line in problems:
            self.problems.add(detail, line, at)


@guarded(EXECUTE_INVALID, "rewrite the <execute> block")
def parse_execute(
    text: str | bytes,
    *,
    tools: Schemas,
    finish_reason: str = "stop",
    id_prefix: str = "call",
) -> ExecuteParse:
    """Read one reply (seed 000): the checked calls of its ``<execute>`` block, or its answer.

    ``tools`` maps each tool name to its argument schema. Raises ``ProtocolError``
    (``EXECUTE_INVALID``) only: a structural problem at its first occurrence (line
    and column), or every call problem at once (``UNKNOWN_TOOL:x``,
    ``call[i]:MISSING_ARG:a``, ...), so nothing runs unless every call is valid.
    Call ids are ``{id_prefix}-1``, ``{id_prefix}-2``, ... in block order.
    """
    text = reply_text(text, EXECUTE_INVALID)
    scan = Scanner(text, normalize_finish_reason(finish_reason))
    scan.read()
    notes = tuple(scan.notes)
    if scan.answer is not None:
        return ExecuteParse([], scan.think, scan.answer, False, notes)
    calls = _Calls(tools, id_prefix)
    for call in scan.calls:
        calls.element(call)
    for index, item in enumerate(scan.json_items or ()):
        calls.json_item(item, index, scan.json_at)
    # Every problem in one error, located at the first: nothing in the block may run.
    calls.problems.raise_any(
        EXECUTE_INVALID, text, "Nothing ran; fix every call and send the whole block again:\n"
    )
    return ExecuteParse(calls.calls, scan.think, None, scan.trailing, notes, scan.block_end)
