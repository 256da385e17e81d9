"""The ``native`` adapter: provider tool definitions out, provider tool calls back.

The run ends with the ``agent__final_report`` tool, or with a turn that
answers in text and calls nothing (what most chat models do when they are
done). Every tool call id gets a ``tool`` message before the next turn, the
refused ones included, so the provider's history stays well formed and the
model learns why a call did not run.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence

from toolwire.agent.pack import opening_messages, render_repair
from toolwire.agent.transports.base import (
    AGENT_EMPTY_ANSWER,
    AgentSetup,
    Rejected,
    RequestParts,
    TurnParse,
    args_size,
    finalize_report,
    format_rejections,
    protocol_error,
    result_payload,
    split_over_limit,
)
from toolwire.domain import Completion, Message
from toolwire.errors import ProtocolError
from toolwire.protocols.native import (
    assistant_message,
    parse_native,
    tool_definitions,
    tool_message,
)
from toolwire.tools.executor import ToolOutcome

__all__ = ["NativeAdapter", "native_tool_messages"]


class NativeAdapter:
    transport = "native"

    def __init__(self, setup: AgentSetup) -> None:
        self.setup = setup
        self.history: list[Message] = opening_messages(
            setup.pack, "native", goal=setup.goal, protocol=""
        )
        self.definitions = tool_definitions(setup.tools.tools, final_format=setup.final_format)

    def request(self) -> RequestParts:
        # No grammar: a native tool call's shape is the provider's business.
        return RequestParts(messages=list(self.history), tools=self.definitions)

    def parse(self, completion: Completion) -> TurnParse:
        native = parse_native(completion)
        calls, refused = split_over_limit(
            native.calls, self.setup.max_calls_per_turn, source="native"
        )
        turn = TurnParse(calls=calls)
        turn.rejected = [
            Rejected(
                item.code,
                item.detail,
                "native",
                tool=item.call.tool,
                args_bytes=args_size(item.call.args),
                call=item.call,
            )
            for item in native.invalid
        ] + refused
        payload, status = None, "success"
        if native.final is not None:
            payload, status = native.final.payload, native.final.status
        elif native.answered:
            if not completion.text.strip():
                turn.error = protocol_error(
                    AGENT_EMPTY_ANSWER,
                    "The answer was empty. Call a tool, or call agent__final_report to finish.",
                )
                return turn
            payload = completion.text
        if payload is not None:
            turn.final_source = "native"
            turn.final_bytes = len(payload.encode("utf-8"))
            try:
                turn.final = finalize_report(status, payload, self.setup)
            except ProtocolError as exc:
                turn.error = exc
        return turn

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None:
        self.history.append(assistant_message(completion.text, completion.tool_calls))
        self.history += native_tool_messages(completion, parsed, outcomes)
        if parsed.error is not None and not completion.tool_calls:
            self.history.append(
                {"role": "user", "content": render_repair(self.setup.pack, _errors(parsed))}
            )


def native_tool_messages(
    completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
) -> list[Message]:
    """One ``tool`` message per native call id, in call order: result, refusal or error."""
    answers: dict[str, deque[str]] = defaultdict(deque)
    for outcome in outcomes:
        text = result_payload(outcome)
        answers[outcome.call.id].append(text if outcome.status == "success" else f"error: {text}")
    for item in parsed.rejected:
        if item.call is not None:
            answers[item.call.id].append(f"error: {item.code}: {item.detail}")
    messages = []
    for call in completion.tool_calls:
        queue = answers.get(call.id)
        if queue:
            text = queue.popleft()
        elif parsed.error is not None and parsed.final_source == "native":
            text = f"error: {format_rejections([], parsed.error)}"  # the refused final report
        else:
            text = "final report received"
        messages.append(tool_message(call.id, text))
    return messages


def _errors(parsed: TurnParse) -> str:
    return format_rejections(parsed.rejected, parsed.error)
