"""The GBNF grammar of one seed-001 ``xml`` turn: this turn's slot tags (nonce and slot
ids are literals) with JSON arguments, or the FINAL tag alone. ``xml-final`` and
``native`` get none: their tool calls travel as provider tool calls, which a text
grammar would forbid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.gbnf import (
    ANSWER_TEXT,
    Rules,
    add_json_rules,
    gbnf_literal,
    json_args_rule,
    rule_name,
)
from toolwire.protocols.slots.wire import final_slot

__all__ = ["final_tag_rule", "slots_grammar"]


def final_tag_rule(rules: Rules, nonce: str, final_format: str) -> str:
    """The seed-001 FINAL tag (``xml``, and ``xml-final`` with tools in the prompt)."""
    final = final_slot(nonce)
    status = '( "success" | "partial" | "failure" )'
    payload = "json-value"
    if final_format not in ("json", "slack-block-kit"):
        payload = rules.add("final-text", ANSWER_TEXT)
    head = gbnf_literal(f'<{final} status="')
    middle = gbnf_literal(f'" format="{final_format}">')
    return rules.add("final", f"{head} {status} {middle} {payload} {gbnf_literal(f'</{final}>')}")


def slots_grammar(
    *,
    nonce: str,
    slots: Sequence[str],
    tools: Sequence[Any],
    final_format: str = "text",
    allow_final: bool = True,
) -> str:
    """This turn's slot tags (in slot order, at least one) or the FINAL tag alone."""
    rules = Rules()
    tool_alts = []
    for tool in tools:
        args = json_args_rule(rules, tool)
        attribute = gbnf_literal(f' tool="{tool.name}">')
        tool_alts.append(rules.add(rule_name("tag", tool.name), f"{attribute} {args}"))
    slot_rules = []
    for i, slot in enumerate(slots, start=1):
        body = " | ".join(tool_alts)
        open_tag, close_tag = gbnf_literal(f"<{slot}"), gbnf_literal(f"</{slot}>\n")
        slot_rules.append(rules.add(f"slot-{i}", f"{open_tag} ( {body} ) {close_tag}"))
    final_tag_rule(rules, nonce, final_format)
    add_json_rules(rules)
    if not slot_rules or not tools:
        return rules.text("final")
    nested = ""
    for name in reversed(slot_rules[1:]):
        nested = f"( {name} {nested} )?".replace("  ", " ")
    # allow_final=False: this turn must call a tool (the agent's first turn under a grammar).
    ending = " | final" if allow_final else ""
    return rules.text(f"{slot_rules[0]} {nested}{ending}".replace("  ", " "))
