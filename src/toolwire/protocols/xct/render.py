"""Seed 003's prompt side: what the model is told and constrained to, and the answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.domain import ToolResult
from toolwire.errors import ProtocolError
from toolwire.gbnf import Rules, add_json_rules, gbnf_literal, json_args_rule, rule_name
from toolwire.protocols import ToolLike

__all__ = [
    "GOAL_MAX_CHARS",
    "decision_schema",
    "render_system_response",
    "render_tool_result",
    "render_xct_instructions",
    "xct_grammar",
]

GOAL_MAX_CHARS = 120  # the schema's goal; the grammar's short-str (goal and message)


def _closed(**properties: Any) -> dict[str, Any]:
    """An object of exactly ``properties``, all required: nothing else, as parse_decision."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def decision_schema(tools: Sequence[ToolLike]) -> dict[str, Any]:
    """One decision as JSON Schema, for servers that constrain to one (OpenAI, Ollama, vLLM,
    llama.cpp); each tool's step is a branch of its own, so its arguments follow its schema."""
    steps = [
        _closed(
            tool={"type": "string", "enum": [tool.name]},
            arguments=dict(tool.args) if tool.args else {"type": "object", "properties": {}},
            goal={"type": "string", "minLength": 1, "maxLength": GOAL_MAX_CHARS},
        )
        for tool in tools
    ]
    message = {"type": "string", "minLength": 1}
    done = _closed(done={"type": "boolean", "enum": [True]}, message=message)
    if not steps:
        return {"title": "xct_decision", **done}
    next_step = _closed(next_step=steps[0] if len(steps) == 1 else {"anyOf": steps})
    return {"title": "xct_decision", "anyOf": [next_step, done]}


def xct_grammar(tools: Sequence[Any], *, done: bool = True) -> str:
    """The GBNF of one decision: a ``next_step`` for one of ``tools``, or ``done``."""
    if not tools:
        raise ValueError("an xct grammar needs at least one tool")
    rules = Rules()
    steps = []
    for tool in tools:
        args = json_args_rule(rules, tool)
        head = gbnf_literal(', "tool": "' + tool.name + '", "arguments": ')
        steps.append(rules.add(rule_name("step", tool.name), f"{head} {args} " + '"}}"'))
    # The goal comes first: a model that has said what the step is for picks its tool
    # by that (JSON key order is free; the parser reads any order).
    next_step = gbnf_literal('{"next_step": {"goal": ') + " short-str ( " + " | ".join(steps) + " )"
    rules.add("next-step", next_step)
    rules.add("short-str", '"\\"" json-char{1,' + str(GOAL_MAX_CHARS) + '} "\\""')
    rules.add("done", gbnf_literal('{"done": true, "message": ') + ' short-str "}"')
    add_json_rules(rules)
    # done=False: this turn must propose a step (the agent's first turn under a grammar).
    return rules.text("next-step | done" if done else "next-step")


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
    *, result: Any = None, error: ProtocolError | str | None = None, details: Any = None
) -> str:
    """Seed 003's system response: success with ``result``, or an error. An invalid decision
    (``ProtocolError``) puts its code, detail codes and location under ``details``; a string
    error takes ``details`` as given (omitted when None)."""
    body: dict[str, Any]
    if error is None:
        body = {"status": "success", "result": result}
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
