"""Seed 001's reply side: ``parse_slots`` runs the one scanner (``scanner.SlotScanner``)
over a whole reply and returns its calls, final report, progress note and invalid tags.
Nothing here executes a tool or knows a provider."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols.final_report import FINAL_REPORT_TOOL, FinalTag
from toolwire.protocols.slots.scanner import SlotScanner
from toolwire.protocols.slots.wire import InvalidTag, Mode, normalize_nonce

__all__ = ["SlotParse", "final_report_call", "merge_native_calls", "parse_slots"]


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
    calls: list[ToolCall] = []
    invalid: list[InvalidTag] = []
    final: FinalTag | None = None
    progress: str | None = None
    for item in scanner.scan(text, finish_reason):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, InvalidTag):
            invalid.append(item)
        elif isinstance(item, FinalTag):
            final = item  # the scanner lets only the first valid FINAL through
        else:
            progress = item.text  # the last progress note wins
    return SlotParse(calls, final, progress, invalid, mode, tuple(scanner.notes))


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
