"""Seed 003's ``xct`` transport: one JSON decision per turn; the system owns the loop.

The model writes one JSON object, ``{"next_step": {"tool", "arguments", "goal"}}`` or
``{"done": true, "message"}``, and nothing else (a markdown code fence around it is
tolerated, with a warning). Per the seed an invalid decision is *not* repaired: its
error goes back as the next turn's input, exactly like a failed tool's, and the model
decides again. ``parse``: ``parse_decision``. ``render``: the prompt's contract, the
decision's JSON Schema and GBNF grammar, the system responses.
"""

from toolwire.protocols.xct import parse, render
from toolwire.protocols.xct.parse import *  # noqa: F403
from toolwire.protocols.xct.render import *  # noqa: F403

__all__ = [*parse.__all__, *render.__all__]
