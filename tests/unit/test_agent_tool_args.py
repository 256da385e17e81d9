"""Tool arguments under JSON Schema's own semantics (issue 32 item 6).

An argument the schema does not declare is accepted unless the schema says
``additionalProperties: false``; the built-in tools, Python functions of fixed
names, close their objects (spec-declared schemas of built-ins too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolwire.domain import ToolCall
from toolwire.spec.model import ToolSpec
from toolwire.tools import build_registry, run_call
from toolwire.tools.registry import Tool


def _spec(name: str, implementation: str, **extra: Any) -> ToolSpec:
    return ToolSpec.model_validate(
        {"name": name, "description": "d", "implementation": implementation, **extra}
    )


def test_an_open_object_schema_takes_undeclared_arguments() -> None:
    seen: list[dict[str, Any]] = []
    tool = Tool("t", "d", {"type": "object"}, "python:x:t", 5.0, lambda **kw: seen.append(kw))
    outcome = run_call({"t": tool}, ToolCall("c", "t", {"x": 1}))
    assert outcome.status == "success", outcome.result.content
    assert seen == [{"x": 1}]


def test_a_closed_schema_names_the_unknown_argument() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    tool = Tool("t", "d", schema, "python:x:t", 5.0, lambda **kw: kw)
    outcome = run_call({"t": tool}, ToolCall("c", "t", {"x": 1}))
    assert outcome.status == "invalid"
    assert "UNKNOWN_ARG:x" in outcome.result.content and "known: a" in outcome.result.content


def test_builtins_refuse_arguments_their_function_does_not_take(tmp_path: Path) -> None:
    declared = {"type": "object", "properties": {"path": {"type": "string"}}}
    registry = build_registry(
        [
            _spec("read", "builtin:read_file"),
            _spec("read2", "builtin:read_file", args=declared),
        ],
        workspace=tmp_path,
    )
    (tmp_path / "a.md").write_text("A")
    for name in ("read", "read2"):
        outcome = run_call(registry, ToolCall("c", name, {"path": "a.md", "mode": "r"}))
        assert outcome.status == "invalid" and "UNKNOWN_ARG:mode" in outcome.result.content
        assert run_call(registry, ToolCall("c", name, {"path": "a.md"})).result.content == "A"
