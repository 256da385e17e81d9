"""Layer 1 of seed 001's final report, for every transport: the tag as written.

Status and format come from the tag's attributes or the tool call's fields; the
payload is kept untouched. Layers 2 and 3 (the payload read by the agent's
format, the clean ``FinalReport``) are the agent's: ``toolwire.agent.final_report``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "FINAL_REPORT_TOOL",
    "FINAL_STATUSES",
    "REPORT_FORMATS",
    "TRUNCATION_REJECTED",
    "FinalTag",
]

FINAL_REPORT_TOOL = "agent__final_report"  # the seed's name for the final-report "tool"
FINAL_STATUSES: tuple[str, ...] = ("success", "failure", "partial")
REPORT_FORMATS: tuple[str, ...] = (
    "text",
    "markdown",
    "json",
    "slack-block-kit",
    "sub-agent",
    "tty",
    "pipe",
)
# Seed 001 facts: an unclosed FINAL cut by the length limit is rejected for these
# formats (half a JSON document is useless) and accepted, marked truncated, for the rest.
TRUNCATION_REJECTED = frozenset(("json", "slack-block-kit"))


@dataclass(frozen=True, slots=True)
class FinalTag:
    """Layer 1 of a final report: the transport fields and the untouched payload."""

    status: str
    format: str
    raw_payload: str
    truncated: bool = False
    slot: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "format": self.format,
            "raw_payload": self.raw_payload,
            "truncated": self.truncated,
            "slot": self.slot,
        }
