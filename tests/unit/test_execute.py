"""The execute transport (seed 000): data-driven vectors, properties.

Vectors live in tests/data/execute/ and use the tools in ``tools.json``:
- valid/NAME.txt + NAME.json: the expected ``execute_parse_to_dict`` (an optional
  ``finish_reason`` key is passed to the parser).
- invalid/NAME.txt + NAME.json: ``code``, ``details``, ``line``, ``column``, optional
  ``finish_reason`` and ``message_contains``.
- results/NAME.json (ToolResult fields) + NAME.txt (``render_results``, exactly).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import ProtocolError
from toolwire.protocols import text as _execscan
from toolwire.protocols.execute import (
    EXECUTE_INVALID,
    execute_parse_to_dict,
    parse_execute,
    render_execute_instructions,
    render_results,
    tool_schemas,
)
from toolwire.spec.model import ToolSpec

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "execute"
TOOLS: dict[str, Any] = json.loads((DATA / "tools.json").read_text())
VALID = sorted((DATA / "valid").glob("*.txt"))
INVALID = sorted((DATA / "invalid").glob("*.txt"))
RESULTS = sorted((DATA / "results").glob("*.json"))
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(path: Path) -> str:
    # Bytes, not read_text(): universal newlines would hide the CRLF vectors.
    return path.read_bytes().decode("utf-8")


def _expected(path: Path) -> dict[str, Any]:
    return json.loads(path.with_suffix(".json").read_text())  # type: ignore[no-any-return]


# ------------------------------------------------------------------ vectors


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_vector(path: Path) -> None:
    expected = _expected(path)
    finish_reason = expected.pop("finish_reason", "stop")
    parsed = parse_execute(_read(path), tools=TOOLS, finish_reason=finish_reason)
    assert execute_parse_to_dict(parsed) == expected


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_vector(path: Path) -> None:
    expected = _expected(path)
    with pytest.raises(ProtocolError) as info:
        parse_execute(_read(path), tools=TOOLS, finish_reason=expected.get("finish_reason", "stop"))
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
    assert len(VALID) >= 20 and len(INVALID) >= 30


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_block_end_marks_what_was_read(path: Path) -> None:
    text = _read(path)
    parsed = parse_execute(
        text, tools=TOOLS, finish_reason=_expected(path).get("finish_reason", "stop")
    )
    if parsed.answer is not None:
        assert parsed.block_end is None
        return
    assert parsed.block_end is not None
    assert re.search(r"</execute\s*>\Z", text[: parsed.block_end])
    again = parse_execute(text[: parsed.block_end], tools=TOOLS)
    assert again.calls == parsed.calls and not again.trailing_text_ignored


def test_block_end_is_past_the_real_close_not_a_quoted_one() -> None:
    for name in ("cdata_holding_execute_close", "json_array_form"):
        text = _read(DATA / "valid" / f"{name}.txt")
        end = parse_execute(text, tools=TOOLS).block_end
        assert end == text.rindex("</execute>") + len("</execute>")
        assert text.count("</execute>") == 2


def test_an_invalid_call_fails_the_batch() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_execute(
            "<execute><read_file><path>a</path></read_file><rm/>"
            "<read_file><path>b</path></read_file></execute>",
            tools=TOOLS,
        )
    assert info.value.details == ["UNKNOWN_TOOL:rm"]


def test_reading_stops_at_the_block_end() -> None:
    text = "<execute><now/></execute><execute><rm/></execute> the answer before the results"
    result = parse_execute(text, tools=TOOLS)
    assert [c.tool for c in result.calls] == ["now"]
    assert result.trailing_text_ignored and result.answer is None


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_results_vector(path: Path) -> None:
    results = [ToolResult(**item) for item in json.loads(path.read_text())]
    assert render_results(results) == _read(path.with_suffix(".txt"))


def test_results_keep_order_and_parse_as_the_seed_array() -> None:
    results = [
        ToolResult("c1", "read_file", "success", "a"),
        ToolResult("c2", "write_file", "failure", "Permission denied"),
        ToolResult("c3", "read_file", "success", {"n": 1}),
    ]
    text = render_results(results)
    assert text.startswith("<results>\n") and text.endswith("\n</results>")
    items = json.loads(text[len("<results>") : -len("</results>")])
    assert items == [
        {"tool": "read_file", "status": "success", "content": "a"},
        {"tool": "write_file", "status": "failure", "content": "Permission denied"},
        {"tool": "read_file", "status": "success", "content": {"n": 1}},
    ]


def _spec_tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name=name,
            description=f"the {name} tool",
            args=schema,
            implementation="python:tests.tools:noop",
        )
        for name, schema in TOOLS.items()
    ]


def test_instructions_list_every_tool_and_argument_and_the_safety_rules() -> None:
    text = render_execute_instructions(_spec_tools())
    for name, schema in TOOLS.items():
        assert f"- {name}: the {name} tool" in text
        for arg in schema["properties"]:
            assert f"    {arg} (" in text
    assert "    max_results (integer, optional)" in text
    assert '    mode (string, one of "add", "remove", optional)' in text
    assert "<![CDATA[" in text and "&lt;" in text and "<results>" in text
    assert "Never write <results> yourself" in text


def test_the_instruction_examples_parse() -> None:
    tools = _spec_tools()[:2]  # read_file, write_file: string arguments, "..." is a valid value
    text = render_execute_instructions(tools)
    blocks = re.findall(r"^ *(<execute>.*?</execute>)", text, re.S | re.M)
    assert len(blocks) == 2  # the element form and the JSON-array form
    parsed = [parse_execute(block, tools=tool_schemas(tools)).calls for block in blocks]
    assert [[(c.tool, c.args, c.source) for c in calls] for calls in parsed] == [
        [("read_file", {"path": "..."}, "xml")],
        [("read_file", {"path": "..."}, "json")],
    ]


# ------------------------------------------------------------------- inputs


def test_call_ids_take_the_prefix() -> None:
    text = "<execute><now/><now/></execute>"
    assert [c.id for c in parse_execute(text, tools=TOOLS, id_prefix="t3").calls] == [
        "t3-1",
        "t3-2",
    ]


def test_bytes_are_decoded_as_utf8() -> None:
    path = DATA / "valid" / "escaped_markup.txt"
    assert parse_execute(path.read_bytes(), tools=TOOLS) == parse_execute(_read(path), tools=TOOLS)
    with pytest.raises(ProtocolError) as info:
        parse_execute(b"<execute>\xff</execute>", tools=TOOLS)
    assert info.value.details == ["INVALID_ENCODING"]


def test_a_tool_without_schema_takes_no_arguments() -> None:
    assert parse_execute("<execute><ping/></execute>", tools={"ping": None}).calls[0].args == {}
    with pytest.raises(ProtocolError) as info:
        parse_execute("<execute><ping><x>1</x></ping></execute>", tools={"ping": None})
    assert info.value.details == ["call[0]:UNKNOWN_ARG:x"]


def test_oversized_input_is_rejected() -> None:
    limit = _execscan.MAX_INPUT_BYTES
    with pytest.raises(ProtocolError) as info:
        parse_execute("<execute>" + "x" * limit, tools=TOOLS)
    assert info.value.details == ["RESPONSE_TOO_LARGE"]
    with pytest.raises(ProtocolError) as info:  # 3 bytes each: the characters are in bounds
        parse_execute("\u20ac" * (limit // 3 + 1), tools=TOOLS)
    assert info.value.details == ["RESPONSE_TOO_LARGE"]


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("<execute>" + "<" * 200_000, "TEXT_IN_EXECUTE"),
        ("<execute>" + "<a>" * 100_000, "call[0]:MARKUP_IN_VALUE:a"),
        ("<execute><write_file><content>" + "a < b " * 100_000, "call[0]:UNCLOSED_ARG:content"),
        ("<execute>[" + '{"a": [' * 50_000, "UNCLOSED_EXECUTE"),
        ("<execute>[" + "[" * 100_000 + "]" * 100_000 + "]</execute>", "INVALID_JSON"),
        ("<think>" + "</thin" * 100_000, "UNCLOSED_THINK"),
    ],
    ids=["open_brackets", "deep_tags", "tag_like_text", "open_json", "deep_json", "think"],
)
def test_pathological_inputs_fail_cleanly(text: str, detail: str) -> None:
    # Linear scans (possessive regexes, bounded tag lookahead): pytest-timeout guards it.
    with pytest.raises(ProtocolError) as info:
        parse_execute(text, tools=TOOLS)
    assert info.value.details == [detail]


def test_a_reply_of_brackets_is_an_answer() -> None:
    text = "<" * 200_000 + "</think" * 10_000
    assert parse_execute(text, tools=TOOLS).answer == text


# --------------------------------------------------------------- properties


_VALUE_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_ARGS = {
    "write_file": st.fixed_dictionaries({"path": _VALUE_TEXT, "content": _VALUE_TEXT}),
    "search_text": st.fixed_dictionaries(
        {"query": _VALUE_TEXT},
        optional={
            "max_results": st.integers(1, 10**12),
            "case_sensitive": st.booleans(),
        },
    ),
    "tag_notes": st.fixed_dictionaries(
        {"paths": st.lists(_VALUE_TEXT, min_size=1, max_size=3)},
        optional={
            "weight": st.floats(allow_nan=False, allow_infinity=False),
            "meta": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
            "mode": st.sampled_from(["add", "remove"]),
        },
    ),
}
_CALLS = st.lists(
    st.sampled_from(sorted(_ARGS)).flatmap(
        lambda tool: _ARGS[tool].map(lambda args, tool=tool: (tool, args))
    ),
    min_size=1,
    max_size=4,
)


def _escape_value(value: Any) -> str:
    """A value as a well-behaved model writes it: escaped, not CDATA (which cannot
    hold ``]]>``); a value other than a string as JSON."""
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if not isinstance(value, str):
        return text  # JSON text: entities are decoded before it is read as JSON
    # Keep a leading or trailing newline as value: add the one newline the parser drops.
    if text.startswith(("\n", "\r\n")):
        text = "\n" + text
    if text.rstrip(" \t").endswith("\n"):
        text += "\n"
    return text


@PROPERTY
@given(_CALLS)
def test_escaped_calls_parse_back_whatever_their_text(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    # Markup, "</execute>", "]]>", entities, newlines at the ends: escaping keeps them all.
    wanted = [ToolCall(f"call-{i + 1}", t, a, "xml") for i, (t, a) in enumerate(calls)]
    out = ["<execute>"]
    for call in wanted:
        args = "".join(f"<{k}>{_escape_value(v)}</{k}>" for k, v in call.args.items())
        out.append(f"<{call.tool}>{args}</{call.tool}>")
    text = "\n".join([*out, "</execute>"]) + "\n"
    assert parse_execute(text, tools=TOOLS).calls == wanted


def _assert_clean(text: str | bytes) -> None:
    try:
        parsed = parse_execute(text, tools=TOOLS)
    except ProtocolError as err:
        assert err.code == EXECUTE_INVALID
        assert err.details and not any(d.startswith("PARSER_ERROR") for d in err.details)
        assert err.message
        if err.line is not None:
            assert err.line >= 1 and err.column is not None and err.column >= 1
        return
    json.dumps(execute_parse_to_dict(parsed))
    assert (parsed.answer is None) == bool(parsed.calls)


@PROPERTY
@given(st.text(st.characters(exclude_categories=())))
def test_random_text_gives_a_result_or_a_protocol_error(text: str) -> None:
    _assert_clean(text)


@PROPERTY
@given(st.binary())
def test_random_bytes_give_a_result_or_a_protocol_error(data: bytes) -> None:
    _assert_clean(data)
    _assert_clean(data.decode("latin-1"))


_SNIPPETS = [
    "<", ">", "&", "</", "/>", "<execute>", "</execute>", "<think>", "</think>", "<results>",
    "<read_file>", "</read_file>", "<path>", "</path>", "<![CDATA[", "]]>", "<!--", "<?x?>",
    "&lt;", "&#0;", '"', "\\", "[", "]", "{", "}", '{"name": "now"}', "NaN", "\r\n", " ",
    '<x a="1">', "<now/>",
]  # fmt: skip
_VECTOR_TEXTS = [_read(p) for p in VALID + INVALID]


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(_VECTOR_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        action = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            piece = draw(st.one_of(st.sampled_from(_SNIPPETS), st.text(max_size=5)))
            text = text[:i] + piece + text[j if action == "replace" else i :]
    return text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_vectors_give_a_result_or_a_protocol_error(text: str) -> None:
    _assert_clean(text)
