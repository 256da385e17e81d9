"""GBNF grammars for tool agents, built from the tool schemas (constrained local decoding).

One builder per transport that a grammar can express:

* ``xct``: exactly one decision, ``{"next_step": {"tool", "arguments", "goal"}}``
  with the tool an enum and its arguments shaped by its schema, or
  ``{"done": true, "message"}``.
* ``execute``: an optional one-line ``<think>``, then one ``<execute>`` block of
  up to ``max_calls`` tool elements with their argument elements, or a plain
  answer (no ``<``, so no block).
* ``xml``: the turn's slot tags (nonce and slot ids are literals) with JSON
  arguments, or the FINAL tag.

``native`` and ``xml-final`` get none: their tool calls travel as provider tool
calls, which a text grammar would forbid.

Arguments: required properties in schema order, optional ones may follow in
schema order; strings are bounded (``maxLength`` or 200 characters) and ASCII
without control characters, so a small model finishes within ``max_tokens``.
Types a grammar cannot shape usefully (nested objects, ``anyOf``) fall back to
a generic JSON value; the executor's JSON Schema check still applies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.grammar import gbnf_literal

__all__ = ["execute_grammar", "slots_grammar", "xct_grammar"]

DEFAULT_STRING_CHARS = 200
ANSWER_CHARS = 400
MAX_ENUM_INTEGERS = 256  # an integer range this small becomes a list of its values

# JSON string body: printable ASCII except " and \, or a simple escape.
_JSON_RULES = [
    ("json-char", r'[ !#-\[\]-~] | "\\" ["\\/nt]'),
    ("ws", '" "?'),
    ("json-int", '"-"? [0-9]{1,12}'),
    ("json-nat", "[0-9]{1,12}"),
    ("json-num", 'json-int ("." [0-9]{1,8})?'),
    ("json-bool", '"true" | "false"'),
    ("json-str", '"\\"" json-char{0,200} "\\""'),
    (
        "json-value",
        'json-str | json-num | json-bool | "null" | json-array | json-object',
    ),
    ("json-array", '"[" ws ( json-value ( "," ws json-value ){0,15} )? "]"'),
    (
        "json-object",
        '"{" ws ( json-str ":" ws json-value ( "," ws json-str ":" ws json-value ){0,15} )? "}"',
    ),
]
# XML element text: printable ASCII except < and & (the model writes no markup there).
_XML_TEXT_CHAR = "[ -%'-;=-~]"
_ANSWER_HEAD = "[!-%'-;=-~]"


def _rule_name(*parts: str) -> str:
    return "-".join(p.replace("_", "-").lower() for p in parts)


class _Rules:
    """Accumulates named rules once each, in first-use order."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        self.rules.setdefault(name, body)
        return name

    def text(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"


def _properties(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return [
        (name, sub if isinstance(sub, Mapping) else {}, name in required)
        for name, sub in props.items()
    ]


def _max_chars(schema: Mapping[str, Any]) -> int:
    bound = schema.get("maxLength")
    if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0:
        return min(bound, 2000)
    return DEFAULT_STRING_CHARS


def _integer_rule(rules: _Rules, schema: Mapping[str, Any], name: str) -> str:
    """Integers; a small ``minimum``..``maximum`` range is spelled out, so every value fits."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        assert isinstance(low, int) and isinstance(high, int)
        if 0 <= high - low <= MAX_ENUM_INTEGERS:
            return rules.add(name, " | ".join(f'"{v}"' for v in range(low, high + 1)))
    if isinstance(low, int) and not isinstance(low, bool) and low >= 0:
        return "json-nat"
    return "json-int"


def _min_chars(schema: Mapping[str, Any]) -> int:
    bound = schema.get("minLength")
    if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0:
        return min(bound, _max_chars(schema))
    return 0


def _sequence(items: list[tuple[str, bool]], sep: str) -> str:
    """Items in order; required ones always, optional ones may be left out; ``sep`` between."""

    def build(i: int, emitted: bool) -> str:
        if i == len(items):
            return ""
        item, required = items[i]
        lead = f"{sep} {item}" if emitted and sep else item
        rest_after = build(i + 1, True)
        with_item = f"{lead} {rest_after}".strip()
        if required:
            return with_item
        if emitted:
            return f"( {lead} )? {rest_after}".strip()
        without = build(i + 1, False)
        return f"( {with_item} | {without} )" if without else f"( {with_item} )?"

    return build(0, False)


# ---------------------------------------------------------------- JSON-shaped arguments


def _json_value_rule(rules: _Rules, schema: Mapping[str, Any], name: str) -> str:
    """A rule admitting JSON values of ``schema``'s type (enum, string, number, ...)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rules.add(name, " | ".join(gbnf_literal(json.dumps(v)) for v in enum))
    kind = schema.get("type")
    if kind == "string":
        low = _min_chars(schema)
        return rules.add(name, f'"\\"" json-char{{{low},{_max_chars(schema)}}} "\\""')
    if kind == "integer":
        return _integer_rule(rules, schema, name)
    if kind == "number":
        return "json-num"
    if kind == "boolean":
        return "json-bool"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item = _json_value_rule(rules, schema["items"], name + "-item")
        return rules.add(name, f'"[" ws ( {item} ( "," ws {item} ){{0,15}} )? "]"')
    return "json-value"


def _json_args_rule(rules: _Rules, tool: Any) -> str:
    items = []
    for prop, sub, required in _properties(tool.args):
        value = _json_value_rule(rules, sub, _rule_name("v", tool.name, prop))
        pair = rules.add(
            _rule_name("p", tool.name, prop), f'{gbnf_literal(json.dumps(prop))} ":" ws {value}'
        )
        items.append((pair, required))
    body = _sequence(items, '"," ws')
    return rules.add(_rule_name("args", tool.name), f'"{{" {body} "}}"' if body else '"{}"')


def _add_json(rules: _Rules) -> None:
    for name, body in _JSON_RULES:
        rules.add(name, body)


def xct_grammar(tools: Sequence[Any]) -> str:
    """One seed-003 decision: a ``next_step`` for one of ``tools``, or ``done``."""
    if not tools:
        raise ValueError("an xct grammar needs at least one tool")
    rules = _Rules()
    steps = []
    for tool in tools:
        args = _json_args_rule(rules, tool)
        head = gbnf_literal('{"next_step": {"tool": "' + tool.name + '", "arguments": ')
        goal = gbnf_literal(', "goal": ')
        steps.append(
            rules.add(_rule_name("step", tool.name), f"{head} {args} {goal} short-str " + '"}}"')
        )
    rules.add("short-str", '"\\"" json-char{1,120} "\\""')
    rules.add("done", gbnf_literal('{"done": true, "message": ') + ' short-str "}"')
    _add_json(rules)
    return rules.text(" | ".join(steps) + " | done")


# ---------------------------------------------------------------- execute (seed 000)


def _xml_value_rule(rules: _Rules, schema: Mapping[str, Any], name: str) -> str:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return rules.add(name, " | ".join(gbnf_literal(v) for v in enum))
    kind = schema.get("type")
    if kind == "integer":
        return _integer_rule(rules, schema, name)
    if kind == "number":
        return "json-num"
    if kind == "boolean":
        return "json-bool"
    if kind in ("array", "object"):
        return _json_value_rule(rules, schema, name)
    low = max(1, _min_chars(schema))
    return rules.add(name, f"{_XML_TEXT_CHAR}{{{low},{_max_chars(schema)}}}")


def execute_grammar(tools: Sequence[Any], *, max_calls: int = 4) -> str:
    """An optional ``<think>`` line, then one ``<execute>`` block or a plain-text answer."""
    if not tools:
        raise ValueError("an execute grammar needs at least one tool")
    rules = _Rules()
    calls = []
    for tool in tools:
        items = []
        for prop, sub, required in _properties(tool.args):
            value = _xml_value_rule(rules, sub, _rule_name("x", tool.name, prop))
            element = rules.add(
                _rule_name("e", tool.name, prop),
                f"{gbnf_literal(f'<{prop}>')} {value} {gbnf_literal(f'</{prop}>')}",
            )
            items.append((element, required))
        body = _sequence(items, "")
        open_tag, close_tag = gbnf_literal(f"<{tool.name}>"), gbnf_literal(f"</{tool.name}>\n")
        calls.append(rules.add(_rule_name("call", tool.name), f"{open_tag} {body} {close_tag}"))
    rules.add("call", " | ".join(calls))
    more = f" call{{0,{max_calls - 1}}}" if max_calls > 1 else ""
    rules.add("execute", gbnf_literal("<execute>\n") + f' call{more} "</execute>"')
    rules.add("think", f'"<think>" {_XML_TEXT_CHAR}{{1,200}} "</think>\\n"')
    rules.add("answer", f"{_ANSWER_HEAD} {_XML_TEXT_CHAR}{{0,{ANSWER_CHARS}}}")
    _add_json(rules)
    return rules.text("think? ( execute | answer )")


# ---------------------------------------------------------------- xml slots (seed 001)


def _final_payload_rule(rules: _Rules, final_format: str) -> str:
    if final_format in ("json", "slack-block-kit"):
        return "json-value"
    return rules.add("final-text", f"{_ANSWER_HEAD} {_XML_TEXT_CHAR}{{0,{ANSWER_CHARS}}}")


def slots_grammar(
    *, nonce: str, slots: Sequence[str], tools: Sequence[Any], final_format: str = "text"
) -> str:
    """This turn's slot tags (in slot order, at least one) or the FINAL tag alone."""
    rules = _Rules()
    tool_alts = []
    for tool in tools:
        args = _json_args_rule(rules, tool)
        attribute = gbnf_literal(f' tool="{tool.name}">')
        tool_alts.append(rules.add(_rule_name("tag", tool.name), f"{attribute} {args}"))
    slot_rules = []
    for i, slot in enumerate(slots, start=1):
        body = " | ".join(tool_alts)
        open_tag, close_tag = gbnf_literal(f"<{slot}"), gbnf_literal(f"</{slot}>\n")
        slot_rules.append(rules.add(f"slot-{i}", f"{open_tag} ( {body} ) {close_tag}"))
    final = f"{nonce}-FINAL"
    status = '( "success" | "partial" | "failure" )'
    payload = _final_payload_rule(rules, final_format)
    head = gbnf_literal(f'<{final} status="')
    middle = gbnf_literal(f'" format="{final_format}">')
    rules.add("final", f"{head} {status} {middle} {payload} {gbnf_literal(f'</{final}>')}")
    _add_json(rules)
    if not slot_rules or not tools:
        return rules.text("final")
    nested = ""
    for name in reversed(slot_rules[1:]):
        nested = f"( {name} {nested} )?".replace("  ", " ")
    return rules.text(f"{slot_rules[0]} {nested} | final".replace("  ", " "))
