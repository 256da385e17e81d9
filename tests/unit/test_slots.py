"""The xml / xml-final transports (seed 001): data-driven vectors, final reports.

Vectors live in tests/data/xml/ and tests/data/xml-final/ (the folder is the mode):
- valid/NAME.txt + NAME.json and invalid/NAME.txt + NAME.json. The JSON holds
  the parse parameters (defaults: nonce ai-agent-1a2b3c4d, slots 0001-0004,
  the four built-in tools, finish_reason "stop"; optional ``slot_start``,
  ``slot_count``, ``finish_reason``), ``expected`` (``SlotParse.to_dict()``),
  optional ``native`` calls with the ``merged`` list ``merge_native_calls``
  returns, and optional ``final_report`` (``expected_format``, ``schema``, and
  the ``report`` or the ``error`` code and details of ``process_final_report``).
- A valid vector has no invalid tag, note or final-report error; an invalid one has one.
- tests/data/xml/render/*.txt: XML-NEXT / XML-PAST snapshots.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.agent.accounting import FINAL_REPORT_XML_COMMAND
from toolwire.agent.final_report import FINAL_REPORT_INVALID, process_final_report
from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import ProtocolError, UsageError
from toolwire.protocols.slots import (
    FINAL_REPORT_TOOL,
    INVALID_JSON_ARGS,
    FinalTag,
    InvalidTag,
    Mode,
    final_report_call,
    final_slot,
    merge_native_calls,
    new_nonce,
    normalize_nonce,
    parse_slots,
    parse_tool_args,
    progress_slot,
    render_invalid_tags,
    render_xml_next,
    render_xml_past,
    slot_ids,
)
from toolwire.protocols.slots import parse as _slotscan

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data"
MODES: tuple[Mode, ...] = ("xml", "xml-final")
VECTORS = sorted(
    p for mode in MODES for p in (DATA / mode).glob("*/*.txt") if p.parent.name != "render"
)
RENDER = DATA / "xml" / "render"
NONCE = "ai-agent-1a2b3c4d"
TOOLS = ("read_file", "write_file", "list_dir", "search_text")
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(path: Path) -> str:
    # Bytes, not read_text(): universal newlines would hide the CRLF vector.
    return path.read_bytes().decode("utf-8")


def _case(path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(text, parse_slots kwargs, vector JSON) of one vector."""
    spec = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    kwargs = {
        "nonce": NONCE,
        "allowed_tools": TOOLS,
        "slots": slot_ids(NONCE, spec.get("slot_start", 1), spec.get("slot_count", 4)),
        "mode": path.parent.parent.name,
    }
    return _read(path), kwargs, spec


def _vector_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}/{path.stem}"


# ------------------------------------------------------------------ vectors


def test_vector_folders_are_complete() -> None:
    for mode in MODES:
        for kind in ("valid", "invalid"):
            folder = DATA / mode / kind
            stems = {p.stem for p in folder.iterdir()}
            assert all(p.suffix in (".txt", ".json") for p in folder.iterdir())
            assert (
                {p.stem for p in folder.glob("*.txt")}
                == stems
                == {p.stem for p in folder.glob("*.json")}
            )
    assert len(VECTORS) >= 60


def test_invalid_vectors_cover_every_code() -> None:
    tag_codes: set[str] = set()
    report_details: set[str] = set()
    for path in VECTORS:
        _, _, spec = _case(path)
        tag_codes |= {tag["code"] for tag in spec["expected"]["invalid"]}
        error = spec.get("final_report", {}).get("error")
        if error:
            report_details |= {
                re.sub(r"^messages\[\d+\]:", "", d).split(":")[0] for d in error["details"]
            }
    assert tag_codes == {
        "WRONG_NONCE",
        "UNDECLARED_SLOT",
        "TOOL_NOT_ALLOWED",
        "MISSING_TOOL_ATTRIBUTE",
        "EMPTY_CONTENT",
        "INVALID_JSON_ARGS",
        "UNCLOSED_TAG",
        "MALFORMED_TAG",
        "NON_FINAL_TAG_IN_XML_FINAL",
        "FINAL_TRUNCATED",
        "INVALID_FINAL_STATUS",
        "MISSING_FINAL_FORMAT",
        "UNKNOWN_FINAL_FORMAT",
        "DUPLICATE_SLOT",
        "DUPLICATE_FINAL",
    }
    assert report_details == {
        "FORMAT_MISMATCH",
        "INVALID_JSON",
        "SCHEMA",
        "MISSING_MESSAGES",
        "NOT_AN_OBJECT",
    }


@pytest.mark.parametrize("path", VECTORS, ids=_vector_id)
def test_vector(path: Path) -> None:
    text, kwargs, spec = _case(path)
    parsed = parse_slots(text, finish_reason=spec.get("finish_reason", "stop"), **kwargs)
    assert parsed.to_dict() == spec["expected"]
    report_spec = spec.get("final_report")
    if "native" in spec:
        native = [ToolCall(c["id"], c["tool"], c["args"], "native") for c in spec["native"]]
        merged = [
            {"id": c.id, "tool": c.tool, "source": c.source, "slot": c.slot, "args": c.args}
            for c in merge_native_calls(native, parsed)
        ]
        assert merged == spec["merged"]
    error = None
    if report_spec is not None:
        assert parsed.final is not None
        kw = {
            "expected_format": report_spec["expected_format"],
            "schema": report_spec.get("schema"),
        }
        if "error" in report_spec:
            with pytest.raises(ProtocolError) as info:
                process_final_report(parsed.final, **kw)
            error = {"code": info.value.code, "details": info.value.details}
            assert error == report_spec["error"]
        else:
            report = process_final_report(parsed.final, **kw)
            got = {
                "status": report.status,
                "format": report.format,
                "content": report.content,
                "metadata": report.metadata,
            }
            assert got == report_spec["report"]
    if path.parent.name == "valid":
        assert parsed.invalid == [] and error is None and not parsed.notes
    else:
        assert parsed.invalid or error is not None or parsed.notes


# ------------------------------------------------------------------ properties

_N = NONCE
FRAGMENTS = [
    f"<{_N}-0001",
    f'<{_N}-0002 tool="read_file">',
    f"</{_N}-0001>",
    f"</{_N}-0002",
    f'<{_N}-FINAL status="success" format="text">',
    f'<{_N}-FINAL status="partial" format="json">',
    f"</{_N}-FINAL>",
    f"<{_N}-PROGRESS>",
    f"</{_N}-PROGRESS>",
    '<ai-agent-deadbeef-0001 tool="list_dir">',
    "<ai-agent-",
    "<ai-agent",
    ' tool="list_dir"',
    " tool='x'",
    ' tool="a" tool="b"',
    '{"path": "a.md"}',
    '{"n": [1, {"k": null}]}',
    "{",
    "}",
    '"',
    ">",
    "/>",
    "</",
    "<",
    "\n",
    "\r\n",
    " ",
    "é🚀",
    "\\u003c",
    "NaN",
    "<think>",
    "</think>",
    "<think",
    "</thi",
]
TEXTS = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=25).map("".join)


@PROPERTY
@given(
    text=st.text() | TEXTS, mode=st.sampled_from(MODES), reason=st.sampled_from(["stop", "length"])
)
def test_parse_slots_never_raises(text: str, mode: Mode, reason: str) -> None:
    parsed = parse_slots(
        text,
        nonce=NONCE,
        allowed_tools=TOOLS,
        slots=slot_ids(NONCE, 1, 2),
        mode=mode,
        finish_reason=reason,
    )
    for call in parsed.calls:
        assert call.source == "xml" and call.tool in TOOLS and isinstance(call.args, dict)
    lines = text.split("\n")
    for tag in parsed.invalid:  # every invalid tag is located at its "<ai-agent-"
        assert lines[tag.line - 1][tag.column - 1 :].startswith("<ai-agent-"), tag
    if mode == "xml-final":
        assert parsed.calls == [] and parsed.progress is None


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@PROPERTY
@given(value=st.dictionaries(st.text(), JSON_VALUES, max_size=5))
def test_parse_tool_args_round_trips_json_objects(value: dict[str, Any]) -> None:
    text = json.dumps(value)
    try:
        assert parse_tool_args(text) == value
    except ProtocolError as exc:  # only a lone surrogate in a generated string is refused
        assert exc.details == ["INVALID_CHARACTER"]


@PROPERTY
@given(raw=st.text() | TEXTS)
def test_parse_tool_args_raises_only_protocol_error(raw: str) -> None:
    try:
        assert isinstance(parse_tool_args(raw), dict)
    except ProtocolError as exc:
        assert exc.code == INVALID_JSON_ARGS and exc.details


SCHEMA = {"type": "object", "required": ["moved"], "properties": {"moved": {"type": "integer"}}}


@PROPERTY
@given(
    raw=st.text() | TEXTS | JSON_VALUES.map(json.dumps),
    fmt=st.sampled_from(_slotscan.REPORT_FORMATS),
    status=st.sampled_from([*_slotscan.FINAL_STATUSES, "done"]),
    truncated=st.booleans(),
)
def test_process_final_report_raises_only_protocol_error(
    raw: str, fmt: str, status: str, truncated: bool
) -> None:
    tag = FinalTag(status, fmt, raw, truncated, final_slot(NONCE))
    try:
        report = process_final_report(
            tag, expected_format=fmt, schema=SCHEMA if fmt == "json" else None
        )
    except ProtocolError as exc:
        assert exc.code == FINAL_REPORT_INVALID and exc.details
        return
    assert report.status == status and report.format == fmt
    assert report.metadata == ({"truncated": True} if truncated else {})


def test_json_args_nested_too_deeply_or_too_long_are_refused() -> None:
    for raw, detail in (
        ('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}", "JSON_VALUE"),
        ('{"a": ' + "7" * 5000 + "}", "JSON_VALUE"),
        ("", "EMPTY"),
        ('{"a": 1} {"b": 2}', "JSON_SYNTAX"),
    ):
        with pytest.raises(ProtocolError) as info:
            parse_tool_args(raw)
        assert info.value.code == INVALID_JSON_ARGS and info.value.details == [detail]


# ------------------------------------------------------------------ final reports


# One payload per format, the content it must become, and a tag status the payload contradicts.
LEAK_CASES = {
    "text": ("\nstatus=success format=json\n", "status=success format=json"),
    "markdown": ("# Report\n\n*done*\n", "# Report\n\n*done*"),
    "tty": ("\x1b[1mdone\x1b[0m", "\x1b[1mdone\x1b[0m"),
    "pipe": ("line 1\nline 2\n", "line 1\nline 2"),
    "sub-agent": ('\n {"status": "success"} \n', '\n {"status": "success"} \n'),
    "json": ('{"status": "ok", "format": "csv"}', {"status": "ok", "format": "csv"}),
    "slack-block-kit": ('{"messages": [{"blocks": []}]}', {"messages": [{"blocks": []}]}),
}


@pytest.mark.parametrize("fmt", sorted(LEAK_CASES))
def test_transport_fields_never_leak_into_the_payload(fmt: str) -> None:
    payload, content = LEAK_CASES[fmt]
    slot = final_slot(NONCE)
    text = f'<{slot} status="partial" format="{fmt}">{payload}</{slot}>'
    parsed = parse_slots(text, nonce=NONCE, allowed_tools=TOOLS, slots=[], mode="xml")
    assert parsed.final is not None
    report = process_final_report(parsed.final, expected_format=fmt, schema=None)
    assert report.status == "partial" and report.format == fmt
    assert report.content == content
    assert report.metadata == {}
    shown = report.content if isinstance(report.content, str) else json.dumps(report.content)
    assert "ai-agent-" not in shown and 'status="partial"' not in shown


def test_final_report_problems_outside_the_models_text() -> None:
    good = FinalTag("success", "text", "ok", False, final_slot(NONCE))
    with pytest.raises(ProtocolError) as info:
        process_final_report(FinalTag("done", "text", "ok"), expected_format="text")
    assert info.value.details == ["INVALID_STATUS"]
    with pytest.raises(UsageError):
        process_final_report(FinalTag("success", "html", "ok"), expected_format="html")
    json_tag = FinalTag("success", "json", "{}")
    with pytest.raises(UsageError):  # a schema that is not one is the spec's fault
        process_final_report(json_tag, expected_format="json", schema={"type": "strng"})
    assert process_final_report(good, expected_format="text").content == "ok"


def test_schema_errors_are_listed_for_the_repair() -> None:
    tag = FinalTag("success", "json", '{"moved": "two"}')
    with pytest.raises(ProtocolError) as info:
        process_final_report(tag, expected_format="json", schema=SCHEMA)
    assert info.value.details == ["SCHEMA:$.moved:type"]
    assert "at $.moved: 'two' is not of type 'integer'" in info.value.message


def test_final_report_call_is_accounted_as_the_final_report_tool() -> None:
    tag = FinalTag("partial", "text", "half", True, final_slot(NONCE))
    call = final_report_call(tag)
    assert (call.id, call.tool, call.source, call.slot) == (
        final_slot(NONCE),
        FINAL_REPORT_TOOL,
        "xml",
        final_slot(NONCE),
    )
    assert call.args == {"status": "partial", "format": "text", "report": "half", "truncated": True}
    assert FINAL_REPORT_XML_COMMAND == "agent__final_report_xml"


# ------------------------------------------------------------------ nonce and slots


def test_nonce_and_slot_numbering() -> None:
    nonces = {new_nonce() for _ in range(20)}
    assert len(nonces) == 20
    assert all(re.fullmatch(r"ai-agent-[0-9a-f]{8}", n) for n in nonces)
    assert normalize_nonce("1a2b3c4d") == normalize_nonce(NONCE) == NONCE
    for bad in ("1A2B3C4D", "ai-agent-1a2b3c4", "x", "ai-agent-1a2b3c4d "):
        with pytest.raises(UsageError):
            normalize_nonce(bad)
    turn1 = slot_ids(NONCE, 1, 3)
    turn2 = slot_ids(NONCE, 1 + len(turn1), 3)
    assert turn1 == [f"{NONCE}-0001", f"{NONCE}-0002", f"{NONCE}-0003"]
    assert turn2 == [f"{NONCE}-0004", f"{NONCE}-0005", f"{NONCE}-0006"]
    assert slot_ids(NONCE, 9999, 2) == [f"{NONCE}-9999", f"{NONCE}-10000"]
    assert slot_ids(NONCE, 5, 0) == []
    with pytest.raises(ValueError):
        slot_ids(NONCE, 0, 1)
    assert (final_slot(NONCE), progress_slot(NONCE)) == (f"{NONCE}-FINAL", f"{NONCE}-PROGRESS")


def test_parse_accepts_the_bare_hex_nonce() -> None:
    text = f'<{NONCE}-0001 tool="list_dir">{{"path": "."}}</{NONCE}-0001>'
    parsed = parse_slots(
        text, nonce="1a2b3c4d", allowed_tools=TOOLS, slots=[f"{NONCE}-0001"], mode="xml"
    )
    assert [c.tool for c in parsed.calls] == ["list_dir"]


# ------------------------------------------------------------------ rendering


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    args: dict[str, Any] = field(default_factory=dict)


RENDER_TOOLS = [
    _Tool(
        "read_file",
        "Read a text file of the workspace.",
        {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
    ),
    _Tool(
        "list_dir",
        "List a folder of the workspace.",
        {"type": "object", "properties": {"path": {"type": "string", "default": "."}}},
    ),
]


def _render_cases() -> dict[str, str]:
    slots = slot_ids(NONCE, 4, 3)
    schema = {"type": "object", "required": ["moved"], "properties": {"moved": {"type": "integer"}}}
    call1 = ToolCall(slots[0], "read_file", {"path": "inbox/a.md"}, "xml", slots[0])
    call2 = ToolCall(slots[1], "list_dir", {"path": "ops"}, "xml", slots[1])
    past = [
        (call1, ToolResult(call1.id, "read_file", "success", "# A\n<b>markup</b>\n", 12.4)),
        (call2, ToolResult(call2.id, "list_dir", "failure", {"error": "no such folder"}, 0.6)),
    ]
    invalid = [
        InvalidTag("TOOL_NOT_ALLOWED", slots[2], "shell", 'tool "shell" is not available.', 3, 1),
    ]
    return {
        "next_xml": render_xml_next(
            nonce=NONCE, tools=RENDER_TOOLS, slots=slots, final_format="markdown", mode="xml"
        ),
        "next_xml_json_schema": render_xml_next(
            nonce=NONCE,
            tools=RENDER_TOOLS,
            slots=slots[:1],
            final_format="json",
            mode="xml",
            final_schema=schema,
        ),
        "next_xml_no_slots": render_xml_next(
            nonce=NONCE, tools=RENDER_TOOLS, slots=[], final_format="text", mode="xml"
        ),
        "next_xml_final": render_xml_next(
            nonce=NONCE,
            tools=RENDER_TOOLS,
            slots=[],
            final_format="slack-block-kit",
            mode="xml-final",
        ),
        "past": render_xml_past(past, invalid=invalid),
    }


@pytest.mark.parametrize("name", sorted(_render_cases()))
def test_rendered_messages_match_their_snapshots(name: str) -> None:
    assert _render_cases()[name] == _read(RENDER / f"{name}.txt")


def test_xml_next_templates_parse_back_into_calls() -> None:
    slots = slot_ids(NONCE, 4, 3)
    text = render_xml_next(
        nonce=NONCE, tools=RENDER_TOOLS, slots=slots, final_format="text", mode="xml"
    )
    filled = text.replace('tool="TOOL_NAME"', 'tool="list_dir"').replace("{JSON arguments}", "{}")
    filled = filled.replace('format="text">\n', 'format="text">\nall done\n')
    filled = filled.replace(">...<", ">busy<")
    parsed = parse_slots(filled, nonce=NONCE, allowed_tools=["list_dir"], slots=slots, mode="xml")
    assert [c.slot for c in parsed.calls] == slots
    assert parsed.final is not None and parsed.final.raw_payload == "\nall done\n"
    assert parsed.progress == "busy"
    # The template's status and format are the expected ones; only the payload is a placeholder.
    assert (parsed.final.status, parsed.final.format) == ("success", "text")


def test_xml_next_by_mode() -> None:
    slots = slot_ids(NONCE, 1, 2)
    xml = render_xml_next(
        nonce=NONCE, tools=RENDER_TOOLS, slots=slots, final_format="text", mode="xml"
    )
    final = render_xml_next(
        nonce=NONCE, tools=RENDER_TOOLS, slots=slots, final_format="text", mode="xml-final"
    )
    assert progress_slot(NONCE) in xml and progress_slot(NONCE) not in final
    assert all(slot in xml and slot not in final for slot in slots)
    assert '"required": ["path"]' in xml and '"required"' not in final
    assert "native tool calls" in final and "read_file, list_dir" in final
    assert final_slot(NONCE) in xml and final_slot(NONCE) in final
    with pytest.raises(ValueError):
        render_xml_next(nonce=NONCE, tools=[], slots=[], final_format="html", mode="xml")


def test_xml_past_reports_results_and_invalid_tags() -> None:
    assert render_xml_past([]) == ""
    assert render_invalid_tags([]) == ""
    many = [InvalidTag("WRONG_NONCE", f"s{i}", None, "wrong nonce.", i + 1, 1) for i in range(25)]
    text = render_invalid_tags(many)
    assert text.count("WRONG_NONCE") == 20 and "... and 5 more" in text
    assert "s0 at line 1, column 1: WRONG_NONCE: wrong nonce." in text
    assert render_xml_past([], invalid=many[:1]).startswith("Tags in your previous reply")


@pytest.mark.parametrize(
    "number", ["123456789012345678901234567890", "-9223372036854775809", "18446744073709551615"]
)
@pytest.mark.parametrize("count", [1, 3])
def test_integers_beyond_64_bits_stay_exact(number: str, count: int) -> None:
    """Arguments decode exactly: an integer beyond 64 bits stays an int."""
    calls = [
        f'<{slot} tool="read_file">{{"path": "n.md", "n": {number}}}</{slot}>'
        for slot in slot_ids(NONCE, 1, count)
    ]
    parsed = parse_slots("\n".join(calls), nonce=NONCE, allowed_tools=TOOLS, slots=None, mode="xml")
    assert [call.args["n"] for call in parsed.calls] == [int(number)] * count
    assert all(type(call.args["n"]) is int for call in parsed.calls)


def test_a_call_without_a_tool_attribute_is_refused() -> None:
    """A numbered tag with no ``tool`` attribute is no call to a tool named ''."""
    text = f'<{NONCE}-0001>{{"path": "a.md"}}</{NONCE}-0001>'
    offered = slot_ids(NONCE, 1, 4)
    parsed = parse_slots(text, nonce=NONCE, allowed_tools=None, slots=offered, mode="xml")
    assert parsed.calls == []
