"""Seed 001's XML tool transport, modes ``xml`` and ``xml-final``: render, parse, final reports.

Render: ``render_xml_next`` (every turn: nonce, tool schemas, slot templates,
FINAL and PROGRESS slots) and ``render_xml_past`` (the last turn's results and
the tags that were not executed). Parse: ``parse_slots`` for a whole reply,
``SlotStreamParser`` for one arriving in chunks; both return the same calls,
final report, progress note and invalid tags (the scanner is shared, see
``_slotscan``). Final reports: ``process_final_report`` (``final_report``)
applies the seed's three layers. Nothing here executes a tool or knows a provider.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import UsageError
from toolwire.protocols._slotscan import (
    FINAL_REPORT_TOOL,
    INVALID_JSON_ARGS,
    PROGRESS_TOOL,
    FinalTag,
    InvalidTag,
    Item,
    ProgressTag,
    SlotScanner,
    parse_tool_args,
)
from toolwire.protocols._textcheck import THINK_OPEN, think_spans
from toolwire.protocols.final_report import FINAL_REPORT_INVALID, process_final_report

__all__ = [
    "FINAL_REPORT_COMMAND",
    "FINAL_REPORT_INVALID",
    "FINAL_REPORT_TOOL",
    "INVALID_JSON_ARGS",
    "PROGRESS_TOOL",
    "FinalTag",
    "InvalidTag",
    "Mode",
    "ProgressTag",
    "ToolLike",
    "SlotParse",
    "SlotStreamParser",
    "collect_items",
    "final_report_call",
    "final_slot",
    "find_nonce",
    "merge_native_calls",
    "new_nonce",
    "normalize_nonce",
    "parse_slots",
    "parse_tool_args",
    "process_final_report",
    "progress_slot",
    "render_invalid_tags",
    "render_xml_next",
    "render_xml_past",
    "slot_ids",
]

FINAL_REPORT_COMMAND = "agent__final_report_xml"  # accounting `command` of an XML final report
Mode = Literal["xml", "xml-final"]
_NONCE_RE = re.compile(r"(?:ai-agent-)?([0-9a-f]{8})\Z")
_TAG_NONCE_RE = re.compile(r"<(ai-agent-[0-9a-f]{8})-")
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


class ToolLike(Protocol):
    """What rendering needs of a tool (``toolwire.spec.ToolSpec`` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...


# ------------------------------------------------------------------ nonce and slots


def find_nonce(text: str) -> str | None:
    """The nonce of the first tag outside reasoning (``toolwire parse`` without ``--nonce``)."""
    spans = think_spans(text) if THINK_OPEN in text else []
    for m in _TAG_NONCE_RE.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            return m.group(1)
    return None


def new_nonce() -> str:
    """A per-run nonce ``ai-agent-<8 lowercase hex>``, fixed for every turn of the run."""
    return f"ai-agent-{secrets.token_hex(4)}"


def normalize_nonce(value: str) -> str:
    """``ai-agent-1a2b3c4d`` from itself or from ``1a2b3c4d`` (the CLI's ``--nonce``)."""
    m = _NONCE_RE.match(value)
    if m is None:
        raise UsageError(f"a nonce is ai-agent-<8 lowercase hex digits>, got {value!r}")
    return f"ai-agent-{m.group(1)}"


def slot_ids(nonce: str, start: int, count: int) -> list[str]:
    """Slots ``NONCE-0001``...: ``start`` is the 1-based number of the first one.

    Numbers run across turns: with 3 slots per turn, turn 1 gets 1-3 and turn 2
    ``slot_ids(nonce, 4, 3)``, so a slot copied from an old turn is undeclared.
    """
    if start < 1 or count < 0:
        raise ValueError(f"slot numbers start at 1 and count >= 0, got {start=}, {count=}")
    return [f"{nonce}-{n:04d}" for n in range(start, start + count)]


def final_slot(nonce: str) -> str:
    return f"{nonce}-FINAL"


def progress_slot(nonce: str) -> str:
    return f"{nonce}-PROGRESS"


# ------------------------------------------------------------------ rendering


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
            f"Use up to {len(slots)} slot{'s' if len(slots) != 1 else ''} this turn; calls "
            "run in slot order and "
            "you see their results next turn. TOOL_NAME is one tool below; the content is "
            "one JSON object matching its arguments schema. Markup inside JSON strings is fine; "
            f"write a value containing </{nonce} as \\u003c/{nonce}.",
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
        "...",
        f"</{final}>",
        "status: success (done), partial (partly done) or failure (could not be done). "
        f'format must be "{final_format}": {_FORMAT_HINTS[final_format]}.',
    ]
    if final_schema is not None and final_format == "json":
        out.append(f"The JSON must match this schema: {_json_text(final_schema)}")
    out += ["", "Tags with another nonce, an unlisted slot or tool, or no content are not run."]
    return "\n".join(out) + "\n"


def _content_text(content: Any) -> str:
    return content if isinstance(content, str) else _json_text(content)


def render_invalid_tags(invalid: Sequence[InvalidTag]) -> str:
    """The tags of the last reply that were not executed, one line each ("" if none)."""
    if not invalid:
        return ""
    out = ["Tags in your previous reply that were NOT executed (fix them, use new slots):"]
    out += [f"- {tag.slot or 'tag'} at {tag.message}" for tag in invalid[:_MAX_LISTED]]
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
            head = f"## {call.slot or call.id} {call.tool}: {result.status}"
            blocks.append(
                f"{head} ({round(result.duration_ms)} ms)\nrequest: {_json_text(call.args)}\n"
                f"response:\n{_content_text(result.content).rstrip(chr(10))}"
            )
    bad = render_invalid_tags(invalid)
    if bad:
        blocks.append(bad.rstrip("\n"))
    return "\n\n".join(blocks) + "\n" if blocks else ""


# ------------------------------------------------------------------ parsing


@dataclass(frozen=True, slots=True)
class SlotParse:
    """What one reply holds: valid calls in text order, the final report, progress, and
    every tag that is not executed (each must be reported back and counted)."""

    calls: list[ToolCall]
    final: FinalTag | None
    progress: str | None
    invalid: list[InvalidTag]
    mode: Mode = "xml"
    notes: tuple[str, ...] = ()  # what was read but is no tag (an unclosed <think>)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [
                {"id": c.id, "tool": c.tool, "args": c.args, "source": c.source, "slot": c.slot}
                for c in self.calls
            ],
            "final": self.final.to_dict() if self.final is not None else None,
            "progress": self.progress,
            "invalid": [tag.to_dict() for tag in self.invalid],
            "notes": list(self.notes),
        }


def collect_items(
    items: Sequence[Item], mode: Mode = "xml", notes: Sequence[str] = ()
) -> SlotParse:
    """Sort scanner items into a ``SlotParse``; the last progress note wins."""
    calls: list[ToolCall] = []
    invalid: list[InvalidTag] = []
    final: FinalTag | None = None
    progress: str | None = None
    for item in items:
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, InvalidTag):
            invalid.append(item)
        elif isinstance(item, FinalTag):
            final = item  # the scanner lets only the first valid FINAL through
        else:
            progress = item.text
    return SlotParse(calls, final, progress, invalid, mode, tuple(notes))


def _scanner(
    nonce: str, allowed_tools: Collection[str] | None, slots: Collection[str] | None, mode: str
) -> SlotScanner:
    return SlotScanner(normalize_nonce(nonce), allowed_tools, slots, mode)


def parse_slots(
    text: str,
    *,
    nonce: str,
    allowed_tools: Collection[str] | None,
    slots: Collection[str] | None,
    mode: Mode,
    finish_reason: str = "stop",
) -> SlotParse:
    """Every tag in a whole reply; never raises on any text.

    ``allowed_tools`` / ``slots`` None accept any tool / any numbered slot of the
    nonce: a check of the wire format alone.

    ``finish_reason`` judges an unclosed FINAL: ``length`` (cut by the output
    limit) rejects json/slack-block-kit and marks text formats truncated.
    """
    scanner = SlotScanner(normalize_nonce(nonce), allowed_tools, slots, mode)
    items, _ = scanner.scan(text, final=True, finish_reason=finish_reason)
    return collect_items(items, mode, scanner.notes)


class SlotStreamParser:
    """``parse_slots`` for a reply arriving in chunks: each call, FINAL, PROGRESS or
    invalid tag is returned by the ``feed`` whose chunk completes its closing tag.

    Only the text from the first incomplete tag on is kept between feeds, and
    searches resume where the last one stopped: linear in the reply's length.
    """

    def __init__(
        self, nonce: str, allowed_tools: Collection[str], slots: Collection[str], mode: Mode
    ) -> None:
        self._scanner = _scanner(nonce, allowed_tools, slots, mode)
        self._mode = mode
        self._buf = ""
        self._origin = (0, 0)  # newlines and columns consumed before _buf[0]
        self._items: list[Item] = []
        self._finished = False

    def feed(self, chunk: str) -> list[Item]:
        if self._finished:
            raise ValueError("feed() after finish()")
        buf, self._buf = self._buf, ""
        buf += chunk  # sole reference: CPython appends in place
        items, resume = self._scanner.scan(buf, final=False, origin=self._origin)
        if resume:
            newlines = buf.count("\n", 0, resume)
            if newlines:
                self._origin = (self._origin[0] + newlines, resume - buf.rfind("\n", 0, resume) - 1)
            else:
                self._origin = (self._origin[0], self._origin[1] + resume)
            buf = buf[resume:]
        self._buf = buf
        self._items += items
        return items

    def finish(self, finish_reason: str = "stop") -> list[Item]:
        """Judge what is still open (an unclosed FINAL by ``finish_reason``)."""
        if self._finished:
            return []
        self._finished = True
        items, _ = self._scanner.scan(
            self._buf, final=True, finish_reason=finish_reason, origin=self._origin
        )
        self._buf = ""
        self._items += items
        return items

    def result(self) -> SlotParse:
        """Everything returned so far, sorted as ``parse_slots`` returns it."""
        return collect_items(self._items, self._mode, self._scanner.notes)


def final_report_call(tag: FinalTag) -> ToolCall:
    """The final report as the call the seed's accounting records (``agent__final_report``)."""
    args: dict[str, Any] = {"status": tag.status, "format": tag.format, "report": tag.raw_payload}
    if tag.truncated:
        args["truncated"] = True
    return ToolCall(tag.slot or "FINAL", FINAL_REPORT_TOOL, args, "xml", tag.slot or None)


def merge_native_calls(native: Sequence[ToolCall], parsed: SlotParse) -> list[ToolCall]:
    """The calls to run this turn, final report last (seed 001 execution flow).

    ``xml-final`` keeps the native tool calls and adds the XML final report;
    ``xml`` ignores native calls (the provider was shown no tools) and uses the tags.
    """
    calls = list(native) if parsed.mode == "xml-final" else list(parsed.calls)
    if parsed.final is not None:
        calls.append(final_report_call(parsed.final))
    return calls
