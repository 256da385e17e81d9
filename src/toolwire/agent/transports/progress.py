"""PROGRESS over native tool calls (seed 001: in xml-final, progress follows the tools).

``xml`` has its PROGRESS slot; ``native`` and ``xml-final`` get an optional
tool, ``agent__progress``, whose one argument is a short line on what the
model is doing. It runs nothing: the adapter takes the line out of the calls
(``TurnParse.progress``, shown by ``toolwire run`` and kept in the report) and
answers the call id with ``progress noted``. Only where tool definitions
travel natively: written into a small model's prompt it would be one more
thing to get wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols.slots import PROGRESS_TOOL  # the seed's one name for progress

__all__ = ["PROGRESS_NOTED", "PROGRESS_TOOL", "progress_definition", "take_progress"]

PROGRESS_NOTED = "progress noted"
MAX_PROGRESS_CHARS = 200


def progress_definition() -> dict[str, Any]:
    """The optional progress tool, in the provider's (OpenAI) shape."""
    return {
        "type": "function",
        "function": {
            "name": PROGRESS_TOOL,
            "description": "Optional: one short line on what you are doing now. Does nothing "
            "else; call it together with the tools that do the work.",
            "parameters": {
                "type": "object",
                "properties": {"progress": {"type": "string", "maxLength": MAX_PROGRESS_CHARS}},
                "required": ["progress"],
                "additionalProperties": False,
            },
        },
    }


def take_progress(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], str | None]:
    """The calls without progress calls, and the last progress line (None if none)."""
    kept: list[ToolCall] = []
    line: str | None = None
    for call in calls:
        if call.tool != PROGRESS_TOOL:
            kept.append(call)
            continue
        text = call.args.get("progress") if isinstance(call.args, dict) else None
        if isinstance(text, str) and text.strip():
            line = " ".join(text.split())[:MAX_PROGRESS_CHARS]
    return kept, line
