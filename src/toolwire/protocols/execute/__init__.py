"""Seed 000's ``execute`` transport: ``<think>`` / ``<execute>`` / ``<results>``.

``wire``: patterns, messages and what the scanner hands on. ``scanner``: the
one-pass scanner (elements and the JSON form). ``parse``: ``parse_execute``, which
checks every call against its tool's schema. ``render``: the prompt side.
``grammar``: the GBNF of one turn.
"""

from toolwire.protocols import Schemas, ToolLike
from toolwire.protocols.execute import grammar, parse, render
from toolwire.protocols.execute.grammar import *  # noqa: F403
from toolwire.protocols.execute.parse import *  # noqa: F403
from toolwire.protocols.execute.render import *  # noqa: F403
from toolwire.protocols.execute.wire import EXECUTE_INVALID

__all__ = [
    "EXECUTE_INVALID",
    "Schemas",
    "ToolLike",
    *parse.__all__,
    *render.__all__,
    *grammar.__all__,
]
