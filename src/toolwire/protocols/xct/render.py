"""Seed 003's prompt side: the decision contract and tool list for the system prompt, the
decision as JSON Schema (for servers that constrain to one), and the system's
response to each step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.domain import ToolResult
from toolwire.errors import ProtocolError
from toolwire.protocols import ToolLike

__all__ = [
    "GOAL_MAX_CHARS",
    "decision_schema",
    "render_system_response",
    "render_tool_result",
    "render_xct_instructions",
]

_UNSET: Any = object()

GOAL_MAX_CHARS = 120  # as the GBNF grammar's goal (xct.grammar.xct_grammar)


def decision_schema(tools: Sequence[ToolLike]) -> dict[str, Any]:
    """The JSON Schema of one decision with ``tools``: what a server that takes a JSON
    Schema (OpenAI, Ollama, vLLM, llama.cpp) constrains the reply to.

    A ``next_step`` names one of the tools (an enum of one per tool, so each tool's
    ``arguments`` follow its own schema) with a goal; ``done`` is ``true`` with a
    message. Nothing else is allowed at any level, as :func:`parse_decision` reads it.
    """
    steps: list[dict[str, Any]] = []
    for tool in tools:
        args = dict(tool.args) if tool.args else {"type": "object", "properties": {}}
        steps.append(
            {
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "enum": [tool.name]},
                    "arguments": args,
                    "goal": {"type": "string", "minLength": 1, "maxLength": GOAL_MAX_CHARS},
                },
                "required": ["tool", "arguments", "goal"],
                "additionalProperties": False,
            }
        )
    done = {
        "type": "object",
        "properties": {
            "done": {"type": "boolean", "enum": [True]},
            "message": {"type": "string", "minLength": 1},
        },
        "required": ["done", "message"],
        "additionalProperties": False,
    }
    if not steps:
        return {"title": "xct_decision", **done}
    next_step = {
        "type": "object",
        "properties": {"next_step": steps[0] if len(steps) == 1 else {"anyOf": steps}},
        "required": ["next_step"],
        "additionalProperties": False,
    }
    return {"title": "xct_decision", "anyOf": [next_step, done]}


def render_xct_instructions(tools: Sequence[ToolLike]) -> str:
    """The decision contract and the tool list, for the system prompt."""
    listing = "\n".join(
        f"- {t.name}: {t.description.strip()}\n  arguments (JSON Schema): "
        + json.dumps(t.args, ensure_ascii=False, separators=(", ", ": "))
        for t in tools
    )
    return f"""\
You propose one action at a time; the system runs it and tells you the outcome. Reply with
exactly one JSON object and nothing else (no text before or after it, no code fence):

{{"next_step": {{"goal": WHY, "tool": NAME, "arguments": ARGUMENTS}}}}
to run one tool, or, when the task is finished,
{{"done": true, "message": REPORT}}
where NAME is one tool below (a JSON string), ARGUMENTS a JSON object that matches its
arguments schema, WHY a JSON string saying what the step is for, and REPORT a JSON string
saying what you did.

The system answers each step with {{"status": "success", "result": ...}} or
{{"status": "error", "message": ..., "details": ...}}. An error is information, not the end:
read it and propose a corrected step. One decision per reply; you never run tools yourself.

Tools:
{listing or "(none)"}
"""


def render_system_response(
    *, result: Any = _UNSET, error: ProtocolError | str | None = None, details: Any = None
) -> str:
    """Seed 003's system response as JSON text: success with ``result``, or an error.

    A ``ProtocolError`` (an invalid decision) becomes its message, with its code,
    detail codes and location under ``details``; a string error takes ``details``
    as given (omitted when None).
    """
    body: dict[str, Any]
    if error is None:
        body = {"status": "success", "result": None if result is _UNSET else result}
    elif isinstance(error, ProtocolError):
        info: dict[str, Any] = {"code": error.code, "errors": list(error.details)}
        if error.line is not None:
            info.update(line=error.line, column=error.column)
        body = {"status": "error", "message": error.message, "details": info}
    else:
        body = {"status": "error", "message": str(error)}
        if details is not None:
            body["details"] = details
    return json.dumps(body, ensure_ascii=False, default=str)


def render_tool_result(result: ToolResult) -> str:
    """A tool's outcome as a system response: failures are errors the model reads."""
    if result.status == "success":
        return render_system_response(result=result.content)
    return render_system_response(error=str(result.content), details={"tool": result.tool})
