"""Seed 003's ``xct`` transport: one JSON decision per turn; the system owns the loop.

The model writes exactly one JSON object, ``{"next_step": {"tool", "arguments",
"goal"}}`` or ``{"done": true, "message"}``; anything else is ``XCT_INVALID``. Per the
seed an invalid decision is *not* repaired: the engine sends the error back as the
next turn's input (``render_system_response``), exactly like a failed tool, and the
model decides again. The one tolerated deviation is a markdown code fence around the
JSON (noted as a warning); prose, a ``<think>`` block or a second decision are errors.
"""

from toolwire.protocols.xct import parse, render
from toolwire.protocols.xct.parse import *  # noqa: F403
from toolwire.protocols.xct.render import *  # noqa: F403

__all__ = [*parse.__all__, *render.__all__]
