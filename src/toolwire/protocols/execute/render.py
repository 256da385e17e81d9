"""Seed 000's prompt side: the tool list and calling rules for the system prompt and the
system's ``<results>`` block."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.domain import ToolResult
from toolwire.protocols import ToolLike

__all__ = [
    "describe_tools",
    "render_execute_instructions",
    "render_results",
    "tool_schemas",
]


def tool_schemas(tools: Sequence[ToolLike]) -> dict[str, Mapping[str, Any]]:
    """Tool name -> argument schema, the shape ``parse_execute`` and ``parse_decision`` take."""
    return {t.name: t.args for t in tools}


def _type_name(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    text = "/".join(kind) if isinstance(kind, list) else str(kind or "any")
    if isinstance(schema.get("enum"), list):
        text += ", one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return text


def describe_tools(tools: Sequence[ToolLike]) -> str:
    """One paragraph per tool: name, description, each argument with type and whether required."""
    out = []
    for t in tools:
        props = t.args.get("properties") or {}
        required = set(t.args.get("required") or ())
        out.append(f"- {t.name}: {t.description.strip()}")
        for name, sub in props.items():
            sub = sub if isinstance(sub, Mapping) else {}
            need = "required" if name in required else "optional"
            desc = str(sub.get("description", "")).strip()
            out.append(f"    {name} ({_type_name(sub)}, {need})" + (f": {desc}" if desc else ""))
        if not props:
            out.append("    (no arguments)")
    return "\n".join(out)


def render_execute_instructions(tools: Sequence[ToolLike]) -> str:
    """How to call tools in this transport, with the tool list; goes in the system prompt."""
    first = tools[0] if tools else None
    name = first.name if first else "tool_name"
    arg_names = list((first.args.get("properties") or {}) if first else ["argument"])[:2]
    example_args = "".join(f"<{a}>...</{a}>" for a in arg_names)
    json_args = ", ".join(f'"{a}": "..."' for a in arg_names)
    return f"""\
Each reply: optionally think inside <think>...</think> (the system ignores it), then EITHER
call tools in one <execute> block OR, when the task is done, write your final answer as plain
text with no <execute> block.

To call tools:
<execute>
<{name}>{example_args}</{name}>
</execute>

Rules:
- One element per call, named after the tool; inside it one element per argument, named
  after the argument. No attributes. Calls run one after another in the order written; a
  failed call does not stop the next ones; the same tool may appear several times.
- Every call is checked before any runs: an unknown tool, an unknown or missing argument or
  a value of the wrong type rejects the whole block.
- Write numbers and true/false as plain text (<limit>5</limit>), arrays and objects as JSON
  (<tags>["a", "b"]</tags>). Text keeps its spaces; a newline right after the opening tag
  and right before the closing tag is layout and is dropped.
- A value containing <, > or & (HTML, XML, code, the text </execute>) must be made safe:
  wrap it in <![CDATA[ ... ]]> (taken literally), or escape it: &lt; for <, &gt; for >,
  &amp; for &.
- Instead of elements you may write one JSON array in the block:
  <execute>[{{"name": "{name}", "args": {{{json_args}}}}}]</execute>
  (JSON strings may hold any text, </execute> included.)
- Stop writing after </execute>. The system runs the calls and answers with
  <results>[{{"tool": ..., "status": "success" or "failure", "content": ...}}]</results>,
  one entry per call in the same order. Never write <results> yourself.

Tools:
{describe_tools(tools)}
"""


def _result_json(result: ToolResult) -> str:
    item = {"tool": result.tool, "status": result.status, "content": result.content}
    try:  # default=str: a value JSON cannot hold (a date, a Path) reaches the model as text
        text = json.dumps(item, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # e.g. non-string keys, circular data
        text = json.dumps({**item, "content": str(result.content)}, ensure_ascii=False)
    # "</" only occurs inside JSON strings, where "<\/" is the same text: a note that
    # holds "</results>" then cannot close the block early (or look like a tag at all).
    return text.replace("</", "<\\/")


def render_results(results: Sequence[ToolResult]) -> str:
    """The system's ``<results>`` block: a JSON array in execution order, one item per line."""
    items = [_result_json(r) for r in results]
    if not items:
        return "<results>\n[]\n</results>"
    return "<results>\n[\n" + ",\n".join(f"  {item}" for item in items) + "\n]\n</results>"
