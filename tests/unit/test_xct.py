"""The xct transport (seed 003): data-driven vectors plus properties.

Vectors live in tests/data/xct/ and are parsed with the tools in ``tools.json``:
- valid/NAME.txt + NAME.json: the expected ``decision_to_dict``.
- invalid/NAME.txt + NAME.json: ``code``, ``details``, ``line``, ``column`` (null for
  shape problems), optional ``message_contains``.
- responses/NAME.json: ``input`` (``result``, ``error`` + ``details``, ``tool_result``
  or a ``decision`` text that fails) and the ``expected`` system response JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import ProtocolError
from toolwire.protocols.xct import (
    XCT_INVALID,
    Done,
    NextStep,
    decision_to_dict,
    parse_decision,
    render_system_response,
    render_tool_result,
    render_xct_instructions,
)
from toolwire.spec.model import ToolSpec

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "xct"
TOOLS: dict[str, Any] = json.loads((DATA / "tools.json").read_text())
VALID = sorted((DATA / "valid").glob("*.txt"))
INVALID = sorted((DATA / "invalid").glob("*.txt"))
RESPONSES = sorted((DATA / "responses").glob("*.json"))
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _expected(path: Path) -> dict[str, Any]:
    return json.loads(path.with_suffix(".json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_vector(path: Path) -> None:
    assert decision_to_dict(parse_decision(_read(path), tools=TOOLS)) == _expected(path)


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_vector(path: Path) -> None:
    expected = _expected(path)
    with pytest.raises(ProtocolError) as info:
        parse_decision(_read(path), tools=TOOLS)
    err = info.value
    assert (err.code, err.details, err.line, err.column) == (
        expected["code"],
        expected["details"],
        expected["line"],
        expected["column"],
    )
    assert expected.get("message_contains", "") in err.message


def test_vector_folders_are_complete() -> None:
    for path in VALID + INVALID:
        assert path.with_suffix(".json").exists(), path
    assert len(VALID) >= 8 and len(INVALID) >= 25


@pytest.mark.parametrize("path", RESPONSES, ids=[p.stem for p in RESPONSES])
def test_system_response_vector(path: Path) -> None:
    case = json.loads(path.read_text())
    given_ = case["input"]
    if "tool_result" in given_:
        text = render_tool_result(ToolResult(**given_["tool_result"]))
    elif "decision" in given_:
        with pytest.raises(ProtocolError) as info:
            parse_decision(given_["decision"], tools=TOOLS)
        text = render_system_response(error=info.value)
    elif "error" in given_:
        text = render_system_response(error=given_["error"], details=given_.get("details"))
    else:
        text = render_system_response(result=given_["result"])
    assert json.loads(text) == case["expected"]


# ------------------------------------------------------------------ decisions


def test_a_next_step_becomes_a_json_tool_call() -> None:
    step = parse_decision(_read(DATA / "valid" / "next_step.txt"), tools=TOOLS)
    assert isinstance(step, NextStep)
    assert step.to_call("t4") == ToolCall("t4", "read_file", {"path": "notes/todo.md"}, "json")


def test_without_tools_only_the_shape_is_checked() -> None:
    text = '{"next_step": {"tool": "anything", "arguments": {"x": 1}, "goal": "g"}}'
    assert parse_decision(text) == NextStep("anything", {"x": 1}, "g")
    with pytest.raises(ProtocolError) as info:
        parse_decision(text, tools=TOOLS)
    assert info.value.details == ["UNKNOWN_TOOL:anything"]


def test_bytes_are_decoded_as_utf8() -> None:
    assert parse_decision('{"done": true, "message": "caf\u00e9"}'.encode()) == Done("caf\u00e9")
    with pytest.raises(ProtocolError) as info:
        parse_decision(b'{"done": true, "message": "\xff"}')
    assert info.value.details == ["INVALID_ENCODING"]


def test_deep_nesting_fails_cleanly() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_decision("[" * 200_000 + "]" * 200_000)
    assert info.value.details == ["NOT_JSON"]


def test_a_tool_failure_reads_as_an_error_result() -> None:
    text = render_tool_result(ToolResult("c1", "write_file", "failure", "Permission denied"))
    assert json.loads(text) == {
        "status": "error",
        "message": "Permission denied",
        "details": {"tool": "write_file"},
    }


def test_instructions_show_both_decisions_and_every_tool_schema() -> None:
    tools = [
        ToolSpec(name=n, description=f"the {n} tool", args=s, implementation="python:m:f")
        for n, s in TOOLS.items()
    ]
    text = render_xct_instructions(tools)
    assert '{"done": true, "message": REPORT}' in text  # no value a model could copy
    assert '{"next_step": {"goal": WHY, "tool": NAME, "arguments": ARGUMENTS}}' in text
    assert '{"status": "error", "message": ..., "details": ...}' in text
    for name, schema in TOOLS.items():
        line = f"- {name}: the {name} tool\n  arguments (JSON Schema): "
        start = text.index(line) + len(line)
        assert json.loads(text[start : text.index("\n", start)]) == schema


# ----------------------------------------------------------------- properties

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_DECISIONS = st.one_of(
    st.builds(NextStep, _TEXT.filter(lambda s: s.strip()), st.dictionaries(_TEXT, _JSON), _TEXT),
    st.builds(Done, _TEXT),
)


@PROPERTY
@given(_DECISIONS, st.sampled_from(["{}", "\n{}\n", "```json\n{}\n```", " ```\n{}```  "]))
def test_a_decision_written_as_json_parses_back(decision: NextStep | Done, layout: str) -> None:
    wire = decision_to_dict(decision)
    del wire["warnings"]
    text = layout.replace("{}", json.dumps(wire, indent=2 if "\n" in layout else None))
    parsed = parse_decision(text)
    fenced = ["removed a markdown code fence around the JSON"] if "```" in layout else []
    assert decision_to_dict(parsed) == {**wire, "warnings": fenced}


def _assert_clean(text: str | bytes) -> None:
    try:
        decision = parse_decision(text, tools=TOOLS)
    except ProtocolError as err:
        assert err.code == XCT_INVALID
        assert err.details and not any(d.startswith("PARSER_ERROR") for d in err.details)
        assert err.message
        if err.line is not None:
            assert err.line >= 1 and err.column is not None and err.column >= 1
        return
    assert isinstance(decision, NextStep | Done)
    json.dumps(decision_to_dict(decision))


@PROPERTY
@given(st.text(st.characters(exclude_categories=())))
def test_random_text_gives_a_decision_or_a_protocol_error(text: str) -> None:
    _assert_clean(text)


@PROPERTY
@given(st.binary())
def test_random_bytes_give_a_decision_or_a_protocol_error(data: bytes) -> None:
    _assert_clean(data)
    _assert_clean(data.decode("latin-1"))


_SNIPPETS = ['{', '}', '[', ']', '"', ",", ":", "\\", "```", "```json\n", "true", "false",
             "null", "NaN", "1e999", '"next_step"', '"done"', '"tool"', '"arguments"',
             '"goal"', '"message"', "\n", " ", "\ud800", "\\ud800", "<think>"]  # fmt: skip
_VECTOR_TEXTS = [_read(p) for p in VALID + INVALID]


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(_VECTOR_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 20)))
        piece = draw(st.one_of(st.sampled_from(_SNIPPETS), st.text(max_size=4)))
        text = text[:i] + piece + text[j if draw(st.booleans()) else i :]
    return text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_vectors_give_a_decision_or_a_protocol_error(text: str) -> None:
    _assert_clean(text)
