"""The ``native`` transport (seed 001): tools travel as provider tool definitions.

``calls``: tool definitions out, a completion's tool calls sorted in (calls to run,
the final report, calls that cannot run) and the history messages. ``leaked``: tool
calls a model wrote as text instead (Hermes, OpenAI legacy, Anthropic XML shapes),
and the grammar of such calls for a model that takes no tool definitions.
"""

from toolwire.protocols.native import calls, leaked
from toolwire.protocols.native.calls import *  # noqa: F403
from toolwire.protocols.native.leaked import *  # noqa: F403

__all__ = [*calls.__all__, *leaked.__all__]
