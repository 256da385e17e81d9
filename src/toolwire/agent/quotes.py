"""The final report quotes the run's last tool results: an answer is not lost to a stock line.

A small model often calls the right tool and then finishes with "The task was
completed successfully.": the answer it found is in the conversation, not in
the report. The system knows every result, so the report carries, beside the
model's words (never mixed into them), the last ``MAX_QUOTED`` successful
tool calls, each with its arguments and its result (shortened to
``QUOTE_CHARS``; a list result says how many items it has), in
``metadata["tool_results"]``; the run's markdown report shows them under
"Tool results (quoted by the system)". Grounded by construction (nothing in
it is the model's), the same for every run and every transport. The store
keeps each result whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolwire.domain import FinalReport
from toolwire.tools.executor import ToolOutcome

__all__ = [
    "MAX_QUOTED",
    "QUOTES_HEADING",
    "QUOTE_CHARS",
    "quote_results",
    "quoted_text",
    "with_quotes",
]

MAX_QUOTED = 3
QUOTE_CHARS = 400
QUOTES_HEADING = "Tool results (quoted by the system):"


def _short(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return _short(content.rstrip("\n"))
    body = json.dumps(content, ensure_ascii=False, default=str)
    if isinstance(content, list):  # "how many" is a list's first fact
        return f"{len(content)} item{'' if len(content) == 1 else 's'}: {_short(body)}"
    return _short(body)


def quote_results(outcomes: Sequence[ToolOutcome]) -> list[str]:
    """One line per quoted call, oldest first: ``tool {args} -> result``."""
    done = [o for o in outcomes if o.status == "success"][-MAX_QUOTED:]
    return [
        f"- {o.call.tool} {json.dumps(o.call.args, ensure_ascii=False, default=str)} -> "
        + _result_text(o.result.content)
        for o in done
    ]


def with_quotes(report: FinalReport, outcomes: Sequence[ToolOutcome]) -> FinalReport:
    """``report`` with the last results quoted in ``metadata["tool_results"]``
    (unchanged when no tool succeeded)."""
    lines = quote_results(outcomes)
    if not lines:
        return report
    return replace(report, metadata={**report.metadata, "tool_results": lines})


def quoted_text(report: FinalReport) -> str:
    """The report as a reader sees it: the model's content, then the system's quotes."""
    content = report.content if isinstance(report.content, str) else json.dumps(report.content)
    lines = report.metadata.get("tool_results") or []
    return content if not lines else f"{content.rstrip()}\n\n{QUOTES_HEADING}\n" + "\n".join(lines)
