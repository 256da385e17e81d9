"""Run tool calls: check arguments, enforce the timeout, never crash, respect the budget.

Every call ends as a :class:`ToolOutcome`: the ``ToolResult`` the model will
read plus what the ``tool_calls`` table records (status, error code, sizes).

* Unknown tool or bad arguments: the tool never runs (status ``invalid``).
* A tool that raises: a failure result with the exception's message; the
  batch goes on (seed 000: a failed tool does not block later ones).
* A tool still running after its ``timeout_s``: a failure result. Python
  cannot kill a thread, so the call runs in a daemon thread that is left to
  finish on its own; its late result is discarded. Tools with side effects
  should therefore be quick or idempotent.
* Output larger than what is left of the context window is replaced with
  ``(tool failed: context window budget exceeded)`` (seed 001's wording).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.arguments import check_args, format_problems
from toolwire.domain import ToolCall, ToolResult
from toolwire.tools.builtins import ToolFailed
from toolwire.tools.registry import Tool

__all__ = [
    "CONTEXT_BUDGET_EXCEEDED",
    "INVALID_ARGS",
    "OVER_BUDGET_TEXT",
    "TOOL_EXCEPTION",
    "TOOL_FAILED",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "OutputBudget",
    "ToolOutcome",
    "content_text",
    "run_call",
    "run_calls",
]

OVER_BUDGET_TEXT = "(tool failed: context window budget exceeded)"

UNKNOWN_TOOL = "UNKNOWN_TOOL"
INVALID_ARGS = "INVALID_ARGS"
TOOL_FAILED = "TOOL_FAILED"  # the tool said why (ToolFailed)
TOOL_EXCEPTION = "TOOL_EXCEPTION"  # anything else the tool raised
TOOL_TIMEOUT = "TOOL_TIMEOUT"
CONTEXT_BUDGET_EXCEEDED = "CONTEXT_BUDGET_EXCEEDED"

_MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One executed (or refused) call: the model's result and the accounting facts."""

    call: ToolCall
    result: ToolResult
    status: str  # success | failure | invalid (never ran)
    error: str | None  # error code (+ ": message" for failures)
    args_bytes: int
    result_bytes: int


class OutputBudget:
    """Characters of tool output the next model call can still take in.

    ``None`` means unlimited. Each admitted output is subtracted, so several
    large results in one batch cannot overflow the window together.
    """

    def __init__(self, chars: int | None) -> None:
        self.remaining = chars

    def admit(self, size: int) -> bool:
        if self.remaining is None:
            return True
        if size > self.remaining:
            return False
        self.remaining -= size
        return True


def content_text(content: Any) -> str:
    """Result content as the text a prompt carries (strings as is, the rest as JSON)."""
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(content)


def _jsonable(content: Any) -> Any:
    """The content itself if JSON can carry it, else its text (a Path, a set...)."""
    try:
        json.dumps(content)
    except (TypeError, ValueError):
        return str(content)
    return content


def _args_bytes(args: Any) -> int:
    try:
        return len(json.dumps(args, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError):
        return len(str(args).encode("utf-8"))


class _Timeout(Exception):
    pass


def _call_with_timeout(tool: Tool, args: Mapping[str, Any]) -> Any:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = tool.fn(**args)
        except BaseException as exc:  # noqa: B036 - handed to the caller, never swallowed
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
    worker.start()
    worker.join(tool.timeout_s)
    if worker.is_alive():
        raise _Timeout
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"


def run_call(
    tools: Mapping[str, Tool], call: ToolCall, *, budget: OutputBudget | None = None
) -> ToolOutcome:
    """Check and run one call; every failure becomes a failure result, never an exception."""
    args_bytes = _args_bytes(call.args)

    def outcome(status: str, content: Any, error: str | None, started: float) -> ToolOutcome:
        text = content_text(content)
        result = ToolResult(
            call_id=call.id,
            tool=call.tool,
            status="success" if status == "success" else "failure",
            content=content,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )
        return ToolOutcome(call, result, status, error, args_bytes, len(text.encode("utf-8")))

    started = time.perf_counter()
    tool = tools.get(call.tool)
    if tool is None:
        known = ", ".join(tools) or "none"
        message = f"unknown tool {call.tool!r}; available tools: {known}"
        return outcome("invalid", message, UNKNOWN_TOOL, started)
    problems = check_args(call.args, tool.args)
    if problems:
        message = f"invalid arguments for {call.tool}: {format_problems(problems)}"
        return outcome("invalid", message, INVALID_ARGS, started)
    try:
        value = _call_with_timeout(tool, call.args)
    except _Timeout:
        message = f"{call.tool} timed out after {tool.timeout_s:g}s"
        return outcome("failure", message, f"{TOOL_TIMEOUT}: {message}", started)
    except ToolFailed as exc:
        message = _short(exc.message)
        return outcome("failure", message, f"{TOOL_FAILED}: {message}", started)
    except (Exception, SystemExit) as exc:  # a tool's sys.exit() must not end the run
        message = _short(f"{type(exc).__name__}: {exc}")
        return outcome("failure", message, f"{TOOL_EXCEPTION}: {message}", started)
    content = _jsonable(value)
    size = len(content_text(content))
    if budget is not None and not budget.admit(size):
        return outcome(
            "failure",
            OVER_BUDGET_TEXT,
            f"{CONTEXT_BUDGET_EXCEEDED}: {size} characters of output",
            started,
        )
    return outcome("success", content, None, started)


def run_calls(
    tools: Mapping[str, Tool], calls: Sequence[ToolCall], *, budget: OutputBudget | None = None
) -> list[ToolOutcome]:
    """Run calls one after another, in order; a failure never stops the ones after it."""
    return [run_call(tools, call, budget=budget) for call in calls]
