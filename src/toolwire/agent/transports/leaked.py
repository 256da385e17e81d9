"""Native transport: tool calls the model wrote as text, recovered and run.

A model served without native tool support (or through a mis-matched chat
template) prints ``<tool_call>{...}</tool_call>`` and friends instead of
sending tool calls; read naively, that text would end the run as its answer.
``leaked_turn`` turns such calls into ordinary ``ToolCall``s (``source:
leaked`` in accounting) that run through the same executor, validation and
final-report path as native calls. The history has no tool-call ids to answer,
so the results go back in one user message (``render_leaked_results``) that
also tells the model to use native tool calls. When the tools travel in the
prompt (``prompt_tools``: a model that takes no tool definitions), text is
the way to call them, and the messages say nothing of native calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from toolwire.agent.transports.base import (
    AgentSetup,
    Rejected,
    TurnParse,
    args_size,
    finalize_report,
    format_rejections,
    protocol_error,
    result_payload,
    split_over_limit,
)
from toolwire.arguments import coerce_args
from toolwire.domain import Completion, ToolCall
from toolwire.errors import ProtocolError
from toolwire.protocols.native import LEAKED_CALL_INVALID, LeakedCall, LeakedScan, parse_native
from toolwire.tools.executor import ToolOutcome

__all__ = ["LEAKED", "leaked_turn", "render_leaked_results"]

LEAKED: Literal["leaked"] = "leaked"  # accounting source of a recovered call


def _tool_call(index: int, leaked: LeakedCall, setup: AgentSetup) -> ToolCall:
    args = dict(leaked.args)
    schema = setup.tools.schemas().get(leaked.tool) if leaked.args_as_text else None
    if schema:  # <invoke> parameters are text: convert them as the execute transport does
        args = coerce_args(args, schema)
    return ToolCall(f"leaked_{index + 1}", leaked.tool, args, LEAKED)


def leaked_turn(completion: Completion, scan: LeakedScan, setup: AgentSetup) -> TurnParse:
    """The turn read from calls written as text (``scan.found`` is true)."""
    calls = [_tool_call(i, leaked, setup) for i, leaked in enumerate(scan.calls)]
    native = parse_native(replace(completion, tool_calls=tuple(calls)))
    runnable = [replace(call, source=LEAKED) for call in native.calls]
    turn = TurnParse()
    turn.calls, refused = split_over_limit(runnable, setup.max_calls_per_turn, LEAKED)
    turn.rejected = [
        Rejected(i.code, i.detail, LEAKED, tool=i.call.tool, args_bytes=args_size(i.call.args))
        for i in native.invalid
    ]
    turn.rejected += [Rejected(r.code, r.detail, LEAKED, tool=r.tool, args_bytes=r.args_bytes)
                      for r in refused]  # fmt: skip
    turn.rejected += [Rejected(LEAKED_CALL_INVALID, p, LEAKED) for p in scan.problems]
    found = list(dict.fromkeys(c.shape for c in scan.calls))
    shapes = ", ".join(f"<{shape}>" for shape in found) or "call-like tags"
    turn.recorded += [f"LEAKED_TOOL_CALLS:{shape}" for shape in found]
    turn.warnings.append(
        f"LEAKED_TOOL_CALLS: recovered {len(scan.calls)} tool call(s) written as text "
        f"({shapes}); {len(scan.problems)} unreadable"
    )
    if native.final is not None:
        turn.final_source = LEAKED
        turn.final_bytes = len(native.final.payload.encode("utf-8", "surrogatepass"))
        try:
            turn.final = finalize_report(native.final.status, native.final.payload, setup)
        except ProtocolError as exc:
            turn.error = exc
    elif not turn.calls:
        fix = (
            "Write each call as one <tool_call> element holding a JSON object with the tool's "
            '"name" and its "arguments".'
            if setup.tools_in_prompt
            else "Call tools with native tool calls (the tools parameter), not as text."
        )
        turn.error = protocol_error(
            LEAKED_CALL_INVALID,
            f"Your reply wrote tool calls as text and none of them could run. {fix}",
            [r.code for r in turn.rejected],
        )
    return turn


def render_leaked_results(
    parsed: TurnParse, outcomes: Sequence[ToolOutcome], *, in_prompt: bool = False
) -> str:
    """The user message answering a turn of leaked calls: results, refusals, the fix."""
    out = (
        ["Results of your tool calls:"]
        if in_prompt
        else [
            "Your reply wrote tool calls as text instead of native tool calls. They were read "
            "and run this time; send tool calls through the tools interface from now on."
        ]
    )
    for outcome in outcomes:
        out.append(
            f"## {outcome.call.tool}: {outcome.status}\n"
            f"request: {json.dumps(outcome.call.args, ensure_ascii=False, default=str)}\n"
            f"response:\n{result_payload(outcome).rstrip()}"
        )
    if parsed.rejected or parsed.error is not None:
        out.append("Not run:\n" + format_rejections(parsed.rejected, parsed.error))
    return "\n\n".join(out) + "\n"
