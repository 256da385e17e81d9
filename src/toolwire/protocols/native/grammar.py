"""The GBNF grammar of a turn when native tools travel in the prompt (``prompt_tools``).

A model that takes no tool definitions calls tools as ``<tool_call>`` text;
under a grammar that text is shaped like the calls the native adapter reads:
one to ``max_calls`` elements ``<tool_call>{"name": NAME, "arguments": ARGS}
</tool_call>``, each name one of the tools and its arguments shaped by its
schema, or the end of the turn: a plain-text answer (``native``) or the FINAL
tag (``xml-final``, ``final_nonce`` set).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.gbnf import (
    ANSWER_CHARS,
    ANSWER_HEAD,
    XML_TEXT_CHAR,
    Rules,
    add_json_rules,
    gbnf_literal,
    json_args_rule,
    rule_name,
)
from toolwire.protocols.slots.grammar import final_tag_rule

__all__ = ["tool_call_grammar"]


def tool_call_grammar(
    tools: Sequence[Any],
    *,
    max_calls: int = 1,
    final_nonce: str | None = None,
    final_format: str = "text",
    ending: bool = True,
) -> str:
    """Tool-call elements for ``tools`` (``.name``, ``.args``), or the turn's ending."""
    rules = Rules()
    calls = []
    for tool in tools:
        args = json_args_rule(rules, tool)
        head = gbnf_literal('<tool_call>\n{"name": "' + tool.name + '", "arguments": ')
        tail = gbnf_literal("}\n</tool_call>\n")
        calls.append(rules.add(rule_name("call", tool.name), f"{head} {args} {tail}"))
    text = rules.add("final-text", f"{ANSWER_HEAD} {XML_TEXT_CHAR}{{0,{ANSWER_CHARS}}}")
    end = text if final_nonce is None else final_tag_rule(rules, final_nonce, final_format)
    add_json_rules(rules)
    if not calls:
        return rules.text(end)
    rules.add("call", " | ".join(calls))
    more = f" call{{0,{max_calls - 1}}}" if max_calls > 1 else ""
    # ending=False: this turn must call a tool (the agent's first turn under a grammar).
    return rules.text(f"call{more} | {end}" if ending else f"call{more}")
