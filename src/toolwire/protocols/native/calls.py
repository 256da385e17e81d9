"""Native tool calls; a turn with text and no tool call at all is the model's final answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.domain import Completion, Message, ToolCall
from toolwire.protocols.final_report import FINAL_REPORT_TOOL, FINAL_STATUSES
from toolwire.protocols.slots.wire import INVALID_JSON_ARGS

__all__ = [
    "FINAL_REPORT_TOOL",
    "INVALID_JSON_ARGS",
    "NativeFinal",
    "NativeInvalid",
    "NativeParse",
    "assistant_message",
    "final_report_definition",
    "parse_native",
    "tool_definition",
    "tool_definitions",
    "tool_message",
]

INVALID_FINAL_REPORT = "INVALID_FINAL_REPORT"
_RAW = "__raw__"  # openai_compat keeps undecodable arguments under this key


@dataclass(frozen=True, slots=True)
class NativeFinal:
    """The final report as the model sent it: transport fields apart from the payload."""

    call_id: str
    status: str
    payload: str


@dataclass(frozen=True, slots=True)
class NativeInvalid:
    call: ToolCall
    code: str
    detail: str


@dataclass(frozen=True, slots=True)
class NativeParse:
    calls: list[ToolCall]
    final: NativeFinal | None
    invalid: list[NativeInvalid]

    @property
    def answered(self) -> bool:
        """True when the turn is a plain-text answer: no tool call of any kind."""
        return not self.calls and self.final is None and not self.invalid


def tool_definition(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """One tool in the OpenAI ``tools`` shape."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def final_report_definition(final_format: str = "text") -> dict[str, Any]:
    """The ``agent__final_report`` tool: how the model ends the run (seed 001)."""
    return tool_definition(
        FINAL_REPORT_TOOL,
        f"End the task with the final report (format: {final_format}). Call it alone, last.",
        {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": list(FINAL_STATUSES)},
                "report": {"type": "string", "description": f"the report, as {final_format}"},
            },
            "required": ["status", "report"],
            "additionalProperties": False,
        },
    )


def tool_definitions(
    tools: Sequence[Any], *, final_format: str | None = "text"
) -> list[dict[str, Any]]:
    """Definitions for ``tools`` (objects with name, description, args), plus the
    final-report tool unless ``final_format`` is None (xml-final reports over XML)."""
    defs = [tool_definition(t.name, t.description, dict(t.args)) for t in tools]
    if final_format is not None:
        defs.append(final_report_definition(final_format))
    return defs


def parse_native(completion: Completion, *, final_tool: bool = True) -> NativeParse:
    """Sort a completion's tool calls into calls to run, the final report (the
    ``agent__final_report`` tool, seed 001's name) and calls that cannot run;
    ``final_tool=False`` treats ``agent__final_report`` as an ordinary (unknown) tool."""
    calls: list[ToolCall] = []
    invalid: list[NativeInvalid] = []
    final: NativeFinal | None = None
    for call in completion.tool_calls:
        call = ToolCall(call.id, call.tool, dict(call.args), "native", call.slot)
        if set(call.args) == {_RAW}:
            detail = f"arguments are not a JSON object: {str(call.args[_RAW])[:120]}"
            invalid.append(NativeInvalid(call, INVALID_JSON_ARGS, detail))
        elif final_tool and call.tool == FINAL_REPORT_TOOL:
            status, report = call.args.get("status"), call.args.get("report")
            if final is not None:
                invalid.append(NativeInvalid(call, INVALID_FINAL_REPORT, "a second final report"))
            elif status not in FINAL_STATUSES or not isinstance(report, str | dict | list):
                detail = f"needs status one of {list(FINAL_STATUSES)} and a report"
                invalid.append(NativeInvalid(call, INVALID_FINAL_REPORT, detail))
            else:
                payload = report if isinstance(report, str) else json.dumps(report)
                final = NativeFinal(call.id, str(status), payload)
        else:
            calls.append(call)
    return NativeParse(calls, final, invalid)


def assistant_message(text: str, calls: Sequence[ToolCall]) -> Message:
    """The assistant turn as the provider expects it back in the history."""
    message: Message = {"role": "assistant", "content": text or None}
    wire = []
    for call in calls:
        raw = set(call.args) == {_RAW}  # arguments the provider could not decode go back as sent
        arguments = str(call.args[_RAW]) if raw else json.dumps(call.args, ensure_ascii=False)
        function = {"name": call.tool, "arguments": arguments}
        wire.append({"id": call.id, "type": "function", "function": function})
    if wire:
        message["tool_calls"] = wire
    return message


def tool_message(call_id: str, content: str) -> Message:
    """The answer to one tool call (every call id needs one before the next turn)."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}
