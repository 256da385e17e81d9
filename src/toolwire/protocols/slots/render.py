"""Seed 001's prompt side: XML-NEXT (every turn: nonce, tool schemas, slot templates,
FINAL and PROGRESS slots) and XML-PAST (the last turn's results and the tags that
were not executed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.domain import ToolCall, ToolResult
from toolwire.protocols import ToolLike
from toolwire.protocols.slots.wire import InvalidTag, Mode, final_slot, progress_slot

__all__ = ["render_invalid_tags", "render_xml_next", "render_xml_past"]

_MAX_LISTED = 20  # invalid tags / schema errors spelled out to the model; the rest are counted
_FORMAT_HINTS = {
    "text": "plain text",
    "markdown": "Markdown",
    "json": "one JSON value",
    "slack-block-kit": 'a JSON object {"messages": [{"blocks": [...]}, ...]} of Slack Block Kit '
    "messages",
    "sub-agent": "your answer for the calling agent, passed on untouched",
    "tty": "text for a terminal (ANSI colours allowed)",
    "pipe": "plain text for a pipe: no colours, no decoration",
}


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def render_xml_next(
    *,
    nonce: str,
    tools: Sequence[ToolLike],
    slots: Sequence[str],
    final_format: str,
    mode: Mode,
    final_schema: Mapping[str, Any] | None = None,
) -> str:
    """XML-NEXT, the per-turn notice: how to call tools and how to end.

    In ``xml`` it lists the tool schemas, one template per slot and the
    PROGRESS slot; in ``xml-final`` it reminds the model that tools go through
    native tool calls and only the final report is XML.
    """
    if final_format not in _FORMAT_HINTS:
        raise ValueError(f"unknown final report format {final_format!r}")
    out = [f"XML-NEXT (session nonce {nonce})", ""]
    if mode == "xml-final":
        names = ", ".join(t.name for t in tools)
        if names:
            out.append(f"Call tools ({names}) with native tool calls, never as XML tags.")
        out.append("Only the final report is written as an XML tag.")
    elif tools and slots:
        out.append("Call a tool by writing a tag in your reply, one call per slot:")
        out += [f'<{slot} tool="TOOL_NAME">{{JSON arguments}}</{slot}>' for slot in slots]
        out += [
            f"Use up to {len(slots)} slot{'s' if len(slots) != 1 else ''} this turn; calls run in "
            "slot order and you see their results next turn. TOOL_NAME is one tool below; the "
            "content is one JSON object matching its arguments schema. Markup inside JSON strings "
            f"is fine; write a value containing </{nonce} as \\u003c/{nonce}.",
            "",
            "Tools:",
        ]
        for tool in tools:
            out += [f"- {tool.name}: {tool.description}", f"  arguments: {_json_text(tool.args)}"]
        out += [
            "",
            "Progress (optional, not a tool call): one short line on what you are doing:",
            f"<{progress_slot(nonce)}>...</{progress_slot(nonce)}>",
        ]
    else:
        out.append("No tool calls this turn: write the final report.")
    final = final_slot(nonce)
    out += [
        "",
        "When the task is done, write the final report; it ends the session:",
        f'<{final} status="success" format="{final_format}">',
        f"</{final}>",
        "with the report itself (what you did) between the two tags.",
        "status: success (done), partial (partly done) or failure (could not be done). "
        f'format must be "{final_format}": {_FORMAT_HINTS[final_format]}.',
    ]
    if final_schema is not None and final_format == "json":
        out.append(f"The JSON must match this schema: {_json_text(final_schema)}")
    out += ["", "Tags with another nonce, an unlisted slot or tool, or no content are not run."]
    return "\n".join(out) + "\n"


def render_invalid_tags(invalid: Sequence[InvalidTag]) -> str:
    """The tags of the last reply that were not executed, one line each ("" if none)."""
    if not invalid:
        return ""
    out = ["Tags in your previous reply that were NOT executed (fix them, use new slots):"]
    out += [
        f"- {tag.slot or 'tag'} at line {tag.line}, column {tag.column}: {tag.code}: {tag.detail}"
        for tag in invalid[:_MAX_LISTED]
    ]
    if len(invalid) > _MAX_LISTED:
        out.append(f"- ... and {len(invalid) - _MAX_LISTED} more")
    return "\n".join(out) + "\n"


def render_xml_past(
    results: Sequence[tuple[ToolCall, ToolResult]], *, invalid: Sequence[InvalidTag] = ()
) -> str:
    """XML-PAST: the last turn's calls with slot, tool, status, duration, request, response.

    Returns "" when there is nothing to report (the engine then sends no message).
    """
    blocks: list[str] = []
    if results:
        blocks.append("XML-PAST: results of the tool calls in your previous reply")
        for call, result in results:
            content = result.content
            response = content if isinstance(content, str) else _json_text(content)
            blocks.append(
                f"## {call.slot or call.id} {call.tool}: {result.status} "
                f"({round(result.duration_ms)} ms)\nrequest: {_json_text(call.args)}\n"
                f"response:\n{response.rstrip(chr(10))}"
            )
    bad = render_invalid_tags(invalid)
    if bad:
        blocks.append(bad.rstrip("\n"))
    return "\n\n".join(blocks) + "\n" if blocks else ""
