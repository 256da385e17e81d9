"""Seed 003's ``xct`` transport: one JSON decision per turn; the system owns the loop.

``parse``: ``parse_decision`` (the one reader). ``render``: the system prompt's
contract, the decision's JSON Schema and the system responses. ``grammar``: the
GBNF of one decision.
"""

from toolwire.protocols.xct import grammar, parse, render
from toolwire.protocols.xct.grammar import *  # noqa: F403
from toolwire.protocols.xct.parse import *  # noqa: F403
from toolwire.protocols.xct.render import *  # noqa: F403

__all__ = [*parse.__all__, *render.__all__, *grammar.__all__]
