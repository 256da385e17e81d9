"""Seed 003's ``xct`` transport: one JSON decision per turn; the system owns the loop.

``parse``: ``parse_decision`` (the one reader). ``render``: the system prompt's
contract, the decision's JSON Schema and the system responses. ``grammar``: the
GBNF of one decision.
"""

from toolwire.protocols.xct.grammar import xct_grammar
from toolwire.protocols.xct.parse import (
    XCT_INVALID,
    Done,
    NextStep,
    XctDecision,
    decision_to_dict,
    parse_decision,
)
from toolwire.protocols.xct.render import (
    GOAL_MAX_CHARS,
    decision_schema,
    render_system_response,
    render_tool_result,
    render_xct_instructions,
)

__all__ = [
    "GOAL_MAX_CHARS",
    "XCT_INVALID",
    "Done",
    "NextStep",
    "XctDecision",
    "decision_schema",
    "decision_to_dict",
    "parse_decision",
    "render_system_response",
    "render_tool_result",
    "render_xct_instructions",
    "xct_grammar",
]
