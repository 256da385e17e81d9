"""The GBNF grammar of one seed-003 decision: a ``next_step`` for one of the tools (its
name an enum, its arguments shaped by its schema), or ``done``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.gbnf import Rules, add_json_rules, gbnf_literal, json_args_rule, rule_name

__all__ = ["xct_grammar"]


def xct_grammar(tools: Sequence[Any], *, done: bool = True) -> str:
    """One seed-003 decision: a ``next_step`` for one of ``tools``, or ``done``."""
    if not tools:
        raise ValueError("an xct grammar needs at least one tool")
    rules = Rules()
    steps = []
    for tool in tools:
        args = json_args_rule(rules, tool)
        head = gbnf_literal(', "tool": "' + tool.name + '", "arguments": ')
        steps.append(rules.add(rule_name("step", tool.name), f"{head} {args} " + '"}}"'))
    # The goal comes first: a model that has said what the step is for picks its tool
    # by that (JSON key order is free; the parser reads any order).
    next_step = gbnf_literal('{"next_step": {"goal": ') + " short-str ( " + " | ".join(steps) + " )"
    rules.add("next-step", next_step)
    rules.add("short-str", '"\\"" json-char{1,120} "\\""')
    rules.add("done", gbnf_literal('{"done": true, "message": ') + ' short-str "}"')
    add_json_rules(rules)
    # done=False: this turn must propose a step (the agent's first turn under a grammar).
    return rules.text("next-step | done" if done else "next-step")
