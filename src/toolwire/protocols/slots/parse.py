"""Seed 001's reply side: ``parse_slots`` for a whole reply, ``SlotStreamParser`` for one
arriving in chunks; both run the one scanner (``scanner.SlotScanner``) and return the
same calls, final report, progress note and invalid tags. Nothing here executes a tool
or knows a provider."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols.final_report import FINAL_REPORT_TOOL, FinalTag
from toolwire.protocols.slots.scanner import SlotScanner
from toolwire.protocols.slots.wire import InvalidTag, Item, Mode, normalize_nonce

__all__ = [
    "FINAL_REPORT_COMMAND",
    "SlotParse",
    "SlotStreamParser",
    "collect_items",
    "final_report_call",
    "merge_native_calls",
    "parse_slots",
]

FINAL_REPORT_COMMAND = "agent__final_report_xml"  # accounting `command` of an XML final report


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
    # The stream parser's scanner, given the whole text at once: same code, same items.
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
        self,
        nonce: str,
        allowed_tools: Collection[str] | None,
        slots: Collection[str] | None,
        mode: Mode,
    ) -> None:
        self._scanner = SlotScanner(normalize_nonce(nonce), allowed_tools, slots, mode)
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
