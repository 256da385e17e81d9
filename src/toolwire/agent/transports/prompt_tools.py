"""Tools for models that take no tool definitions: written into the prompt, read from the text.

``native`` and ``xml-final`` send tools as provider tool definitions (seed
001). Two providers drop them without a word: the in-process model
(``llamacpp:``, which sends role and content only) and llama-cpp-python's
OpenAI-compatible server (``server: llamacpp``; also with
``--chat_format chatml-function-calling``). A run there used to send a
prompt with no tool in it (issue 32). For those, the tools are written into
the system prompt in the form chat templates use for tools (Hermes, Qwen,
SmolLM3: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``), and the
calls come back as text, read by the leaked-calls reader the native adapter
already has. Results go back as a user message. Everything else (checks,
accounting, the final report) is unchanged; accounting says ``source:
leaked``. The run says so before the first call (``spec check`` and ``run``);
the rule is ``toolwire.providers.tool_carriage`` (light enough for ``spec check``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from toolwire.providers.tool_carriage import (
    PROMPT_TOOLS_TRANSPORTS,
    carries_native_tools,
    prompt_tools_note,
)

__all__ = [
    "PROMPT_TOOLS_TRANSPORTS",
    "carries_native_tools",
    "prompt_tools_note",
    "render_prompt_tools",
    "warn_prompt_tools",
]

_log = logging.getLogger("toolwire.agent")


def warn_prompt_tools(transport: str, model_cfg: Any) -> bool:
    """Log the note (``run`` shows it on stderr); True when the tools go in the prompt."""
    note = prompt_tools_note(transport, model_cfg)
    if note is not None:
        _log.warning("note: %s", note)
    return note is not None


def render_prompt_tools(definitions: Sequence[dict[str, Any]], *, finish: str) -> str:
    """The tool section of the system prompt: the call form, then each tool's schema.

    ``definitions`` are the provider tool definitions the run would have sent
    (OpenAI shape). The call form names its parts instead of showing a sample
    call, so a small model has nothing to copy that would look like a real call.
    """
    lines = []
    for definition in definitions:
        fn = definition.get("function", definition)
        lines.append(
            f"- {fn['name']}: {' '.join(str(fn.get('description', '')).split())}\n"
            "  arguments (JSON Schema): "
            + json.dumps(fn.get("parameters", {}), ensure_ascii=False, separators=(", ", ": "))
        )
    listing = "\n".join(lines)
    return (
        "To call a tool, write a tool_call element: its content is one JSON object with "
        'the keys "name" (the tool\'s name) and "arguments" (an object that matches the '
        "tool's arguments schema). One element per call; the results come back in the "
        "next message.\n"
        "<tool_call>\n{JSON object}\n</tool_call>\n\n"
        f"Tools:\n{listing}\n\n{finish}"
    )
