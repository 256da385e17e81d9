"""The ``native`` transport (seed 001): tools travel as provider tool definitions.

``calls``: definitions out, a completion's tool calls sorted in, the history messages.
``leaked``: tool calls a model wrote as text instead, and their grammar. With native
tool definitions there is no grammar: a text grammar would forbid the provider's calls.
"""

from toolwire.protocols.native import calls, leaked
from toolwire.protocols.native.calls import *  # noqa: F403
from toolwire.protocols.native.leaked import *  # noqa: F403

__all__ = [*calls.__all__, *leaked.__all__]
