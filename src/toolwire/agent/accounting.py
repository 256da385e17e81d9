"""``tool_calls`` rows: one for every call, refused tag and final report of a run.

Seed 001's accounting: ``command`` is the real tool name, except an XML final
report, whose command is ``agent__final_report_xml``; ``source`` says how the
call travelled (``native``, ``xml``, ``json``). Refused calls and tags are
rows too (status ``invalid``, error = their code): a malformed tag is never
dropped silently, and SQL can count them per transport.

``args_json`` holds the arguments as JSON, ``result_text`` the result as the model
read it (for a refused call: why it was refused); the final report's row holds its
status and content as ``args_json``. The HTML report shows them per call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolwire.agent.transports.base import FINAL_REPORT_TOOL, Rejected
from toolwire.domain import FinalReport
from toolwire.errors import ProtocolError
from toolwire.tools.executor import ToolOutcome, content_text

__all__ = ["FINAL_REPORT_XML_COMMAND", "ToolLedger", "args_json"]

FINAL_REPORT_XML_COMMAND = "agent__final_report_xml"
_XML_TRANSPORTS = ("xml", "xml-final")


def args_json(args: Any) -> str:
    """Arguments as the JSON the store keeps (anything JSON cannot carry as its text)."""
    return json.dumps(args, ensure_ascii=False, default=str)


@dataclass
class ToolLedger:
    """Rows in the order things happened; ``seq`` counts across the whole run."""

    transport: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _add(self, turn: int, **values: Any) -> None:
        self.rows.append({"turn": turn, "seq": len(self.rows), **values})

    @property
    def ran_a_tool(self) -> bool:
        """Whether a tool has run in this run (its call passed the checks, whatever the result)."""
        return any(row.get("status") in ("success", "failure") for row in self.rows)

    def add_outcome(self, turn: int, outcome: ToolOutcome) -> None:
        call = outcome.call
        self._add(
            turn,
            slot=call.slot,
            tool=call.tool,
            command=call.tool,
            source=call.source,
            status=outcome.status,
            duration_ms=outcome.result.duration_ms,
            args_bytes=outcome.args_bytes,
            result_bytes=outcome.result_bytes,
            error=outcome.error,
            args_json=args_json(call.args),
            result_text=content_text(outcome.result.content),
        )

    def add_rejected(self, turn: int, item: Rejected) -> None:
        self._add(
            turn,
            slot=item.slot,
            tool=item.tool,
            command=self._command(item.tool, item.source) if item.tool else None,
            source=item.source,
            status="invalid",
            duration_ms=0.0,
            args_bytes=item.args_bytes,
            result_bytes=0,
            error=item.code,
            args_json=args_json(item.call.args) if item.call is not None else None,
            result_text=item.detail,
        )

    def add_final(
        self,
        turn: int,
        *,
        source: str,
        payload_bytes: int,
        report: FinalReport | None,
        error: ProtocolError | None = None,
        slot: str | None = None,
    ) -> None:
        """The final report as a call: accepted (``success``) or refused (``invalid``)."""
        result_bytes, final_json = 0, None
        if report is not None:
            final_json = args_json({"status": report.status, "content": report.content})
            content = report.content
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            result_bytes = len(text.encode("utf-8"))
        self._add(
            turn,
            slot=slot,
            tool=FINAL_REPORT_TOOL,
            command=self._command(FINAL_REPORT_TOOL, source),
            source=source,
            status="success" if report is not None else "invalid",
            duration_ms=0.0,
            args_bytes=payload_bytes,
            result_bytes=result_bytes,
            error=error.code if error is not None else None,
            args_json=final_json,
            result_text=error.message if error is not None else None,
        )

    def _command(self, tool: str, source: str) -> str:
        # Seed 001 names the XML final report's command; every other call keeps its tool name.
        if tool == FINAL_REPORT_TOOL and source == "xml" and self.transport in _XML_TRANSPORTS:
            return FINAL_REPORT_XML_COMMAND
        return tool
