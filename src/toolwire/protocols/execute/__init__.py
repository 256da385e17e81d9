"""Seed 000's ``execute`` transport: ``<think>`` / ``<execute>`` / ``<results>``.

``wire``: patterns, messages and what the scanner hands on. ``scanner`` (with
``json_form``): the one resumable scanner, for whole replies and streams.
``parse``: ``parse_execute`` and ``ExecuteStreamParser``, which check every call
against its tool's schema. ``render``: the prompt side. ``grammar``: the GBNF of
one turn.
"""

from toolwire.protocols import Schemas, ToolLike
from toolwire.protocols.execute.grammar import execute_grammar
from toolwire.protocols.execute.parse import (
    ANY_TOOL,
    ExecuteParse,
    ExecuteStreamParser,
    execute_parse_to_dict,
    parse_execute,
)
from toolwire.protocols.execute.render import (
    describe_tools,
    render_execute,
    render_execute_instructions,
    render_results,
    tool_schemas,
)
from toolwire.protocols.execute.wire import EXECUTE_INVALID

__all__ = [
    "ANY_TOOL",
    "EXECUTE_INVALID",
    "ExecuteParse",
    "ExecuteStreamParser",
    "Schemas",
    "ToolLike",
    "describe_tools",
    "execute_grammar",
    "execute_parse_to_dict",
    "parse_execute",
    "render_execute",
    "render_execute_instructions",
    "render_results",
    "tool_schemas",
]
