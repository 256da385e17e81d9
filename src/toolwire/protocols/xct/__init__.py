"""Seed 003's ``xct`` transport: one JSON decision per turn; the system owns the loop.

The model writes exactly one JSON object, ``{"next_step": {"tool", "arguments",
"goal"}}`` or ``{"done": true, "message"}``; ``parse.parse_decision`` reads it and
raises ``ProtocolError(XCT_INVALID)`` for anything else, every problem listed as a
detail code. Per the seed an invalid decision is *not* repaired: the engine sends
``render_system_response(error=...)`` back as the next turn's input, exactly like a
failed tool, and the model decides again. The one tolerated deviation is a markdown
code fence around the JSON (noted as a warning); prose, a ``<think>`` block or a
second decision are errors. ``render``: the system prompt's contract, the decision's
JSON Schema and GBNF grammar, the system responses.
"""

from toolwire.protocols.xct import parse, render
from toolwire.protocols.xct.parse import *  # noqa: F403
from toolwire.protocols.xct.render import *  # noqa: F403

__all__ = [*parse.__all__, *render.__all__]
