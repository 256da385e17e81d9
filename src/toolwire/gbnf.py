"""GBNF (llama.cpp's grammar format) helpers: literals, token-id literals, and JSON Schema
shaped rules. Each transport builds its own grammar from these (``protocols/<transport>/
grammar.py``); providers take the finished grammar string and know no protocol.

Arguments: required properties in schema order, optional ones may follow in
schema order; strings are bounded (``maxLength`` or 200 characters) and ASCII
without control characters, so a small model finishes within ``max_tokens``.
Types a grammar cannot shape usefully (nested objects, ``anyOf``) fall back to
a generic JSON value; the executor's JSON Schema check still applies.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "ANSWER_TEXT",
    "DEFAULT_STRING_CHARS",
    "XML_TEXT_CHAR",
    "Rules",
    "add_json_rules",
    "gbnf_literal",
    "integer_rule",
    "json_args_rule",
    "json_value_rule",
    "max_chars",
    "min_chars",
    "properties",
    "rule_name",
    "scalar_rule",
    "sequence",
    "tokenize_literals",
]

DEFAULT_STRING_CHARS = 200
MAX_ENUM_INTEGERS = 256  # an integer range this small becomes a list of its values

# JSON string body: printable ASCII except " and \, or a simple escape; and never "</":
# a "<" comes with the character after it, which may not be "/" (or another "<"). Every
# in-prompt call ends with a closing tag (native's "</tool_call>", a slot's "</ai-agent-..."),
# and its parser ends the call at the first one, even inside a JSON string: the
# grammar must not admit a reply its parser then cuts short. ("<x" counts as one of
# a string's bounded characters.)
_JSON_RULES = [
    ("json-char", r'[ !#-;=-\[\]-~] | "<" [ !#-.0-;=-\[\]-~] | "\\" ["\\/nt]'),
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
XML_TEXT_CHAR = "[ -%'-;=-~]"
# A final answer as plain text: 1 to 401 such characters, never starting blank.
ANSWER_TEXT = "[!-%'-;=-~] " + XML_TEXT_CHAR + "{0,400}"


def gbnf_literal(value: str) -> str:
    """Quote ``value`` as a GBNF string literal (``"..."`` with C-style escapes)."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)  # GBNF literals are UTF-8: non-ASCII goes in as is
    out.append('"')
    return "".join(out)


_LITERAL_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def tokenize_literals(gbnf: str, tokenize: Callable[[str], Sequence[int]]) -> str:
    """Rewrite every string literal of ``gbnf`` as the model's own token ids (``<[id]>``).

    Same language, one tokenisation. Without this, greedy decoding under a grammar
    may spell literals in fragments ("o" "pe" "ra" "t" "ion"): that doubles the
    tokens an envelope costs and lets a fragment such as "n" (for "node") win an
    enum choice on letter frequency. Needs a llama.cpp whose GBNF has token refs.
    Raises ValueError on an unterminated literal, class or token ref.
    """
    out: list[str] = []
    i, n = 0, len(gbnf)
    while i < n:
        ch = gbnf[i]
        if ch == "#":  # comment to end of line
            end = gbnf.find("\n", i)
            end = n if end < 0 else end
        elif ch == "[":
            end = _scan_to(gbnf, i + 1, "]") + 1
        elif ch == "<":
            end = _scan_to(gbnf, i + 1, ">") + 1
        elif ch == '"':
            end = _scan_to(gbnf, i + 1, '"') + 1
            ids = list(tokenize(_decode_literal(gbnf[i + 1 : end - 1])))
            refs = " ".join(f"<[{t}]>" for t in ids)
            # Parenthesised, so a following ?, * or {m,n} still applies to the whole literal.
            out.append('""' if not ids else refs if len(ids) == 1 else f"({refs})")
            i = end
            continue
        else:
            end = i + 1
        out.append(gbnf[i:end])
        i = end
    return "".join(out)


def _scan_to(text: str, start: int, closer: str) -> int:
    """Index of the first unescaped ``closer`` at or after ``start``."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == closer:
            return i
        else:
            i += 1
    raise ValueError(f"unterminated {closer!r} group starting at offset {start - 1}")


def _decode_literal(body: str) -> str:
    """The text a GBNF string literal's body stands for (its escapes resolved)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = body[i + 1 : i + 2]
        if esc in _LITERAL_ESCAPES:
            out.append(_LITERAL_ESCAPES[esc])
            i += 2
        elif esc in _HEX_ESCAPES:
            width = _HEX_ESCAPES[esc]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or any(c not in string.hexdigits for c in digits):
                raise ValueError(f"bad \\{esc} escape {digits!r} in a GBNF literal")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise ValueError(f"unknown escape \\{esc} in a GBNF literal")
    return "".join(out)


def rule_name(*parts: str) -> str:
    return "-".join(p.replace("_", "-").lower() for p in parts)


class Rules:
    """Accumulates named rules once each, in first-use order."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        self.rules.setdefault(name, body)
        return name

    def text(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"


def properties(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return [
        (name, sub if isinstance(sub, Mapping) else {}, name in required)
        for name, sub in props.items()
    ]


def max_chars(schema: Mapping[str, Any]) -> int:
    bound = schema.get("maxLength")
    if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0:
        return min(bound, 2000)
    return DEFAULT_STRING_CHARS


def integer_rule(rules: Rules, schema: Mapping[str, Any], name: str) -> str:
    """Integers; a small ``minimum``..``maximum`` range is spelled out, so every value fits."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        assert isinstance(low, int) and isinstance(high, int)
        if 0 <= high - low <= MAX_ENUM_INTEGERS:
            return rules.add(name, " | ".join(f'"{v}"' for v in range(low, high + 1)))
    if isinstance(low, int) and not isinstance(low, bool) and low >= 0:
        return "json-nat"
    return "json-int"


def min_chars(schema: Mapping[str, Any]) -> int:
    bound = schema.get("minLength")
    if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0:
        return min(bound, max_chars(schema))
    return 0


def sequence(items: list[tuple[str, bool]], sep: str) -> str:
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


def scalar_rule(rules: Rules, schema: Mapping[str, Any], name: str) -> str | None:
    """The rule of an integer, number or boolean ``schema`` (written alike in JSON and as
    element text), or None for other types."""
    kind = schema.get("type")
    if kind == "integer":
        return integer_rule(rules, schema, name)
    if kind == "number":
        return "json-num"
    if kind == "boolean":
        return "json-bool"
    return None


def json_value_rule(rules: Rules, schema: Mapping[str, Any], name: str) -> str:
    """A rule admitting JSON values of ``schema``'s type (enum, string, number, ...)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rules.add(name, " | ".join(gbnf_literal(json.dumps(v)) for v in enum))
    kind = schema.get("type")
    if kind == "string":
        low = min_chars(schema)
        return rules.add(name, f'"\\"" json-char{{{low},{max_chars(schema)}}} "\\""')
    scalar = scalar_rule(rules, schema, name)
    if scalar is not None:
        return scalar
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item = json_value_rule(rules, schema["items"], name + "-item")
        return rules.add(name, f'"[" ws ( {item} ( "," ws {item} ){{0,15}} )? "]"')
    return "json-value"


def json_args_rule(rules: Rules, tool: Any) -> str:
    items = []
    for prop, sub, required in properties(tool.args):
        value = json_value_rule(rules, sub, rule_name("v", tool.name, prop))
        pair = rules.add(
            rule_name("p", tool.name, prop), f'{gbnf_literal(json.dumps(prop))} ":" ws {value}'
        )
        items.append((pair, required))
    body = sequence(items, '"," ws')
    return rules.add(rule_name("args", tool.name), f'"{{" {body} "}}"' if body else '"{}"')


def add_json_rules(rules: Rules) -> None:
    for name, body in _JSON_RULES:
        rules.add(name, body)
