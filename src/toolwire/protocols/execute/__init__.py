"""Seed 000's ``execute`` transport: ``<think>`` / ``<execute>`` / ``<results>``.

``scanner``: the one-pass reader of a reply's structure. ``parse``: ``parse_execute``,
which checks every call against its tool's schema. ``render``: the prompt side.
``grammar``: the GBNF of one turn.
"""

from toolwire.protocols.execute import grammar, parse, render
from toolwire.protocols.execute.grammar import *  # noqa: F403
from toolwire.protocols.execute.parse import *  # noqa: F403
from toolwire.protocols.execute.render import *  # noqa: F403
from toolwire.protocols.execute.scanner import EXECUTE_INVALID

__all__ = ["EXECUTE_INVALID", *parse.__all__, *render.__all__, *grammar.__all__]
