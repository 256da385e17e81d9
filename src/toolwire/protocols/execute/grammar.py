"""The GBNF grammar of one seed-000 turn: an optional one-line ``<think>``, then one
``<execute>`` block of up to ``max_calls`` tool elements with their argument elements,
or a plain answer (no ``<``, so no block)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.gbnf import (
    ANSWER_TEXT,
    XML_TEXT_CHAR,
    Rules,
    add_json_rules,
    gbnf_literal,
    json_value_rule,
    max_chars,
    min_chars,
    properties,
    rule_name,
    scalar_rule,
    sequence,
)

__all__ = ["execute_grammar"]


def _xml_value_rule(rules: Rules, schema: Mapping[str, Any], name: str) -> str:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return rules.add(name, " | ".join(gbnf_literal(v) for v in enum))
    scalar = scalar_rule(rules, schema, name)
    if scalar is not None:
        return scalar
    if schema.get("type") in ("array", "object"):
        return json_value_rule(rules, schema, name)
    low = max(1, min_chars(schema))
    return rules.add(name, f"{XML_TEXT_CHAR}{{{low},{max_chars(schema)}}}")


def execute_grammar(tools: Sequence[Any], *, max_calls: int = 4, answer: bool = True) -> str:
    """An optional ``<think>`` line, then one ``<execute>`` block or a plain-text answer."""
    if not tools:
        raise ValueError("an execute grammar needs at least one tool")
    rules = Rules()
    calls = []
    for tool in tools:
        items = []
        for prop, sub, required in properties(tool.args):
            value = _xml_value_rule(rules, sub, rule_name("x", tool.name, prop))
            element = rules.add(
                rule_name("e", tool.name, prop),
                f"{gbnf_literal(f'<{prop}>')} {value} {gbnf_literal(f'</{prop}>')}",
            )
            items.append((element, required))
        body = sequence(items, "")
        open_tag, close_tag = gbnf_literal(f"<{tool.name}>"), gbnf_literal(f"</{tool.name}>\n")
        calls.append(rules.add(rule_name("call", tool.name), f"{open_tag} {body} {close_tag}"))
    rules.add("call", " | ".join(calls))
    more = f" call{{0,{max_calls - 1}}}" if max_calls > 1 else ""
    rules.add("execute", gbnf_literal("<execute>\n") + f' call{more} "</execute>"')
    rules.add("think", f'"<think>" {XML_TEXT_CHAR}{{1,200}} "</think>\\n"')
    rules.add("answer", ANSWER_TEXT)
    add_json_rules(rules)
    # answer=False: this turn must call a tool (the agent's first turn under a grammar).
    return rules.text("think? ( execute | answer )" if answer else "think? execute")
