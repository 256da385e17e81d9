"""The native transport's mapping: tool definitions, tool calls read back, history messages.

Vectors in tests/data/tools/native/NAME.json: a ``completion`` (text + tool calls
in the replay-script shape), ``final_tool`` (False in xml-final) and the
``expected`` sorting of its calls by ``parse_native``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire.domain import Completion, ToolCall
from toolwire.protocols.native import (
    FINAL_REPORT_TOOL,
    assistant_message,
    final_report_definition,
    parse_native,
    tool_definitions,
    tool_message,
)
from toolwire.spec.model import ToolSpec

pytestmark = pytest.mark.unit

VECTORS = sorted((Path(__file__).resolve().parents[1] / "data" / "tools" / "native").glob("*.json"))


def _completion(data: dict[str, Any]) -> Completion:
    calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in data["tool_calls"])
    return Completion(text=data["text"], tool_calls=calls)


def test_there_are_vectors() -> None:
    assert len(VECTORS) >= 8


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_parse_native_vector(path: Path) -> None:
    case = json.loads(path.read_text("utf-8"))
    parsed = parse_native(_completion(case["completion"]), final_tool=case["final_tool"])
    expected = case["expected"]
    assert [{"id": c.id, "tool": c.tool, "args": c.args} for c in parsed.calls] == expected["calls"]
    assert all(c.source == "native" for c in parsed.calls)
    final = parsed.final
    assert (
        None
        if final is None
        else {"call_id": final.call_id, "status": final.status, "payload": final.payload}
    ) == expected["final"]
    assert [{"id": i.call.id, "code": i.code} for i in parsed.invalid] == expected["invalid"]
    assert parsed.answered is expected["answered"]


def test_tool_definitions_are_openai_functions_plus_the_final_report() -> None:
    spec = ToolSpec.model_validate(
        {
            "name": "read_file",
            "description": "Read a file.",
            "implementation": "builtin:read_file",
            "args": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    )
    defs = tool_definitions([spec], final_format="markdown")
    assert defs[0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    assert defs[1] == final_report_definition("markdown")
    assert defs[1]["function"]["name"] == FINAL_REPORT_TOOL
    assert "markdown" in defs[1]["function"]["description"]
    assert [d["function"]["name"] for d in tool_definitions([spec], final_format=None)] == [
        "read_file"
    ]


def test_history_messages_round_trip_the_calls() -> None:
    calls = (
        ToolCall("a", "read_file", {"path": "é.md"}),
        ToolCall("b", "read_file", {"__raw__": "{broken"}),
    )
    message = assistant_message("", calls)
    assert message["content"] is None
    assert [c["id"] for c in message["tool_calls"]] == ["a", "b"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "é.md"}
    assert message["tool_calls"][1]["function"]["arguments"] == "{broken"  # sent back verbatim
    assert "tool_calls" not in assistant_message("done", ())
    assert tool_message("a", "text") == {"role": "tool", "tool_call_id": "a", "content": "text"}
