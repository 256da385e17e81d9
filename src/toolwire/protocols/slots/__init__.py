"""Seed 001's XML tool transport, modes ``xml`` and ``xml-final``.

``wire``: the nonce, slot names and tag codes. ``scanner``: the one substring
scanner for whole replies and streams. ``parse``: ``parse_slots`` and
``SlotStreamParser`` on that scanner. ``render``: XML-NEXT and XML-PAST.
``grammar``: the GBNF of one ``xml`` turn. Final reports go through
``protocols.final_report`` (every transport).
"""

from toolwire.protocols.final_report import (
    FINAL_REPORT_INVALID,
    FINAL_REPORT_TOOL,
    FinalTag,
    process_final_report,
)
from toolwire.protocols.slots.grammar import slots_grammar
from toolwire.protocols.slots.parse import (
    FINAL_REPORT_COMMAND,
    SlotParse,
    SlotStreamParser,
    collect_items,
    final_report_call,
    merge_native_calls,
    parse_slots,
)
from toolwire.protocols.slots.render import render_invalid_tags, render_xml_next, render_xml_past
from toolwire.protocols.slots.scanner import parse_tool_args
from toolwire.protocols.slots.wire import (
    INVALID_JSON_ARGS,
    PROGRESS_TOOL,
    InvalidTag,
    Mode,
    ProgressTag,
    final_slot,
    find_nonce,
    new_nonce,
    normalize_nonce,
    progress_slot,
    slot_ids,
)

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
    "slots_grammar",
]
