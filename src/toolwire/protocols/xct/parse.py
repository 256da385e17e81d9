"""Reading one decision: ``parse_decision`` and the decisions it returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from toolwire.arguments import arg_problems
from toolwire.domain import ToolCall
from toolwire.protocols import Schemas
from toolwire.protocols.text import (
    Problems,
    fenced_span,
    guarded,
    located_error,
    lone_surrogate,
    reject_constant,
    reply_text,
    skip_blanks,
    strip_span,
)

__all__ = ["XCT_INVALID", "Done", "NextStep", "XctDecision", "decision_to_dict", "parse_decision"]

XCT_INVALID = "XCT_INVALID"  # errors.py holds no constant for seed 003 yet

_SHAPES = (
    '{"next_step": {"tool": ..., "arguments": {...}, "goal": ...}}'
    ' or {"done": true, "message": ...}'
)
_fail = partial(located_error, XCT_INVALID)  # (src, pos, detail, message): an error at src[pos]
_Dups = dict[int, list[str]]  # id() of a decoded object -> the keys it repeats
_STEP_FIELDS = {"tool": str, "arguments": dict, "goal": str}


@dataclass(frozen=True, slots=True)
class NextStep:
    """The model proposes one tool call; the system validates and runs it."""

    tool: str
    arguments: dict[str, Any]
    goal: str
    warnings: tuple[str, ...] = ()

    def to_call(self, call_id: str) -> ToolCall:
        """The step as the engine's tool call (``source`` json, for accounting)."""
        return ToolCall(call_id, self.tool, dict(self.arguments), "json")


@dataclass(frozen=True, slots=True)
class Done:
    """The model signals completion; ``message`` is its final answer."""

    message: str
    warnings: tuple[str, ...] = ()


XctDecision = NextStep | Done


def decision_to_dict(decision: XctDecision) -> dict[str, Any]:
    """The decision in its wire shape, plus parse warnings (``toolwire parse``, vectors)."""
    if isinstance(decision, NextStep):
        step = {"tool": decision.tool, "arguments": decision.arguments, "goal": decision.goal}
        return {"next_step": step, "warnings": list(decision.warnings)}
    return {"done": True, "message": decision.message, "warnings": list(decision.warnings)}


def _decoder(dups: _Dups) -> json.JSONDecoder:
    """A strict decoder that notes repeated keys (json would silently keep the last one)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                dups.setdefault(id(obj), []).append(key)
            obj[key] = value
        return obj

    return json.JSONDecoder(object_pairs_hook=pairs, parse_constant=reject_constant)


def _decoded_end(text: str, start: int) -> int:
    """Where a JSON value starting at ``start`` ends, or -1 (a trial: no duplicate notes)."""
    try:
        return _decoder({}).raw_decode(text, start)[1]
    except (ValueError, RecursionError):
        return -1


def _decode(src: str, lo: int, hi: int, dups: _Dups) -> Any:
    """The one JSON value in ``src[lo:hi]``, or the error saying what else is there."""
    if lo >= hi:
        raise _fail(src, None, "EMPTY_RESPONSE", "The reply is empty: reply with " + _SHAPES + ".")
    text = src[:hi]
    if text[lo] not in "{[":
        brace = text.find("{", lo)
        if brace >= 0 and _decoded_end(text, brace) >= 0:
            message = (
                "Text {at} is outside the JSON object: reply with the JSON object only, "
                "no words, tags or fences before or after it."
            )
            raise _fail(src, lo, "TEXT_OUTSIDE_JSON", message)
        if _decoded_end(text, lo) != hi:  # not even one bare JSON value (which _check rejects)
            raise _fail(src, lo, "NOT_JSON", f"The reply {{at}} is not JSON: reply with {_SHAPES}.")
    try:
        value, end = _decoder(dups).raw_decode(text, lo)
    except json.JSONDecodeError as err:
        message = f"The JSON is invalid {{at}}: {err.msg}. Reply with {_SHAPES}."
        raise _fail(src, err.pos, "NOT_JSON", message) from None
    except (ValueError, RecursionError) as err:
        raise _fail(src, lo, "NOT_JSON", f"The JSON {{at}} is invalid: {err}.") from None
    if lone_surrogate(value, text, lo, end):
        raise _fail(src, lo, "NOT_JSON", "The JSON {at} escapes a lone surrogate (\\ud800).")
    rest = skip_blanks(text, end)
    if rest < hi and text[rest] == "{":
        message = "A second JSON object starts {at}: make exactly one decision per reply."
        raise _fail(src, rest, "MULTIPLE_DECISIONS", message)
    if rest < hi:
        message = "Text {at} follows the JSON object: reply with the JSON object only."
        raise _fail(src, rest, "TEXT_OUTSIDE_JSON", message)
    return value


def _check_step(step: Any, dups: _Dups, tools: Schemas | None, bad: Problems) -> None:
    if not isinstance(step, dict):
        message = '"next_step" must be an object {"tool", "arguments", "goal"}.'
        bad.add("WRONG_TYPE:next_step", message)
        return
    for key in dups.get(id(step), ()):
        bad.add(f"DUPLICATE_FIELD:next_step.{key}", f'"next_step" has "{key}" twice: keep one.')
    for key, kind in _STEP_FIELDS.items():
        if key not in step:
            bad.add(f"MISSING_FIELD:next_step.{key}", f'"next_step" has no "{key}": add it.')
        elif not isinstance(step[key], kind):
            wanted = "an object" if kind is dict else "a string"
            bad.add(f"WRONG_TYPE:next_step.{key}", f'"next_step.{key}" must be {wanted}.')
    name, args = step.get("tool"), step.get("arguments")
    if isinstance(name, str) and not name.strip():
        bad.add("EMPTY_FIELD:next_step.tool", '"next_step.tool" is empty: name a tool.')
    for key in step:
        if key not in _STEP_FIELDS:
            bad.add(f"UNKNOWN_FIELD:next_step.{key}", f'"next_step" has "{key}": remove it.')
    if not isinstance(args, dict):
        return
    for key in dups.get(id(args), ()):
        bad.add(f"DUPLICATE_ARG:{key}", f'"arguments" has "{key}" twice: give it once.')
    if tools is None or not isinstance(name, str) or not name.strip():
        return
    if name not in tools:
        known = ", ".join(tools) or "none"
        bad.add(f"UNKNOWN_TOOL:{name}", f"{name!r} is not a tool; the tools are: {known}.")
        return
    schema = tools[name] or {"type": "object", "properties": {}}
    for detail, line in arg_problems(args, schema, f"<{name}>"):
        bad.add(detail, line)


def _check(obj: Any, dups: _Dups, tools: Schemas | None) -> XctDecision:
    bad = Problems()
    if not isinstance(obj, dict):
        if isinstance(obj, list) and len(obj) > 1:
            bad.add("MULTIPLE_DECISIONS", "The reply is a list: make exactly one decision.")
        else:
            bad.add("NOT_AN_OBJECT", "The reply must be one JSON object: " + _SHAPES + ".")
    elif "next_step" in obj and "done" in obj:
        bad.add("MULTIPLE_DECISIONS", 'Use "next_step" or "done", never both in one reply.')
    elif "next_step" not in obj and "done" not in obj:
        keys = ", ".join(f'"{k}"' for k in obj) or "no keys"
        bad.add("UNKNOWN_SHAPE", f"The object has {keys}: reply with {_SHAPES}.")
    else:
        key = "next_step" if "next_step" in obj else "done"
        if key in dups.get(id(obj), ()):
            bad.add("MULTIPLE_DECISIONS", f'"{key}" appears twice: make exactly one decision.')
        for other in obj:
            if other not in ("next_step", "done", "message"):
                message = f'"{other}" is not part of a decision: remove it.'
                bad.add(f"UNKNOWN_FIELD:{other}", message)
        if key == "next_step":
            if "message" in obj:
                bad.add("UNKNOWN_FIELD:message", '"message" belongs to "done": remove it.')
            _check_step(obj["next_step"], dups, tools, bad)
        else:
            if not isinstance(obj["done"], bool):
                bad.add("WRONG_TYPE:done", '"done" must be true.')
            elif not obj["done"]:
                bad.add("DONE_NOT_TRUE", '"done" is false: to continue, send "next_step" instead.')
            if "message" not in obj:
                bad.add("MISSING_FIELD:message", '"done" needs a "message": add your answer.')
            elif not isinstance(obj["message"], str):
                bad.add("WRONG_TYPE:message", '"message" must be a string.')
    bad.raise_any(XCT_INVALID)
    return Done(obj["message"]) if "done" in obj else NextStep(**obj["next_step"])


@guarded(XCT_INVALID, "send one JSON decision")
def parse_decision(text: str | bytes, *, tools: Schemas | None = None) -> XctDecision:
    """Read one decision; with ``tools``, also check the tool and its arguments. The first
    structural problem (``NOT_JSON``, ``TEXT_OUTSIDE_JSON``, ...) is raised with its line and
    column; shape problems (``MISSING_FIELD:x``, ``UNKNOWN_TOOL:x``, ...) all at once."""
    text = reply_text(text, XCT_INVALID)
    lo, hi = strip_span(text)
    fence = fenced_span(text, lo, hi)
    if fence is not None:
        lo, hi = strip_span(text, *fence)
    dups: _Dups = {}
    decision = _check(_decode(text, lo, hi, dups), dups, tools)
    if fence is None:
        return decision
    return replace(decision, warnings=("removed a markdown code fence around the JSON",))
