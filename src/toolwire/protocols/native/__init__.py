"""The ``native`` transport (seed 001): tools travel as provider tool definitions.

``calls``: tool definitions out, a completion's tool calls sorted in (calls to
run, the final report, calls that cannot run). ``leaked``: tool calls a model
wrote as text instead (Hermes, OpenAI legacy, Anthropic XML shapes). No grammar:
a text grammar would forbid the provider's tool calls.
"""

from toolwire.protocols.native import calls, grammar, leaked
from toolwire.protocols.native.calls import *  # noqa: F403
from toolwire.protocols.native.grammar import *  # noqa: F403
from toolwire.protocols.native.leaked import *  # noqa: F403

__all__ = [*calls.__all__, *leaked.__all__, *grammar.__all__]
