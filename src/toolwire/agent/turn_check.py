"""The engine's verdict on one model reply, without running anything (``toolwire parse --spec``).

The reply goes through the very adapter a run would use (``start_agent``) and
``read_completion``; then each call the adapter would run is checked the way
the executor checks it before running a tool (unknown tool, arguments against
the schema). So ``parse --spec`` reports every error the engine would, and
nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolwire.agent.context import load_agent_context
from toolwire.agent.loop import start_agent
from toolwire.agent.transports.base import TurnParse
from toolwire.agent.transports.slots import SlotsAdapter
from toolwire.agent.turn_reader import read_completion
from toolwire.arguments import check_args, format_problems
from toolwire.domain import Completion, ToolCall
from toolwire.protocols.slots import normalize_nonce, slot_ids
from toolwire.tools.executor import INVALID_ARGS, UNKNOWN_TOOL

__all__ = ["check_turn", "turn_to_dict"]


def _would_refuse(tools: Any, call: ToolCall) -> dict[str, Any] | None:
    """The executor's pre-run checks (``tools.executor.run_call``) for one call."""
    tool = tools.get(call.tool)
    if tool is None:
        known = ", ".join(tools) or "none"
        detail = f"unknown tool {call.tool!r}; available tools: {known}"
        return {"id": call.id, "tool": call.tool, "code": UNKNOWN_TOOL, "detail": detail}
    problems = check_args(call.args, tool.args)
    if problems:
        detail = f"invalid arguments for {call.tool}: {format_problems(problems)}"
        return {"id": call.id, "tool": call.tool, "code": INVALID_ARGS, "detail": detail}
    return None


def turn_to_dict(turn: TurnParse, refused: list[dict[str, Any]]) -> dict[str, Any]:
    final = turn.final
    return {
        "usable": turn.usable,
        "calls": [
            {"id": c.id, "tool": c.tool, "args": c.args, "source": c.source, "slot": c.slot}
            for c in turn.calls
        ],
        "rejected": [
            {"code": r.code, "detail": r.detail, "source": r.source, "tool": r.tool, "slot": r.slot}
            for r in turn.rejected
        ],
        "refused_before_running": refused,
        "final": None
        if final is None
        else {
            "status": final.status,
            "format": final.format,
            "content": final.content,
            "metadata": final.metadata,
            "source": turn.final_source,
        },
        "error": turn.error.to_dict() if turn.error is not None else None,
        "codes": list(turn.error_codes()),
        "warnings": list(turn.warnings),
        "progress": turn.progress,
    }


def check_turn(
    spec_path: str | Path,
    transport: str,
    completion: Completion,
    *,
    nonce: str | None = None,
    workspace: str | Path | None = None,
) -> tuple[bool, dict[str, Any]]:
    """``(ok, verdict)``: ok when the engine would run every call and refuse nothing."""
    base = Path(spec_path).resolve().parent
    ctx = load_agent_context(spec_path, workspace=workspace or base, transport=transport)
    adapter = start_agent(ctx).adapter
    if isinstance(adapter, SlotsAdapter):
        if nonce is not None:
            adapter.nonce = normalize_nonce(nonce)
        if adapter.mode == "xml":  # a stored reply may come from any turn of the run
            limits = ctx.constraints
            count = limits.max_tool_calls_per_turn * limits.max_iterations
            adapter.slots = slot_ids(adapter.nonce, 1, count)
    assert adapter is not None
    _, turn = read_completion(adapter, completion)
    refused = [r for r in (_would_refuse(ctx.tools, c) for c in turn.calls) if r is not None]
    ok = turn.usable and not turn.rejected and not refused and turn.error is None
    return ok, turn_to_dict(turn, refused)
