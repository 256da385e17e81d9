"""The execute transport's whole-text fast path (``_execfast``) against its scanner.

``parse_execute`` reads a well-formed element-form reply in bulk and leaves
everything else to the streaming scanner. The fast path may decline any text,
but when it accepts one it must give exactly what the scanner gives: the same
calls, think text, warnings, trailing flag and block end. Checked on every
vector, on mutated vectors and on generated replies (tools, argument names and
values, layout, entities, think blocks, text around the block).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.errors import ProtocolError
from toolwire.protocols._execfast import fast_execute, layout_value
from toolwire.protocols._execscan import value_text
from toolwire.protocols.execute import ExecuteParse, ExecuteStreamParser, parse_execute

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "execute"
TOOLS: dict[str, Any] = json.loads((DATA / "tools.json").read_text())
VECTORS = sorted((DATA / "valid").glob("*.txt")) + sorted((DATA / "invalid").glob("*.txt"))
TEXTS = [p.read_bytes().decode("utf-8") for p in VECTORS]
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# search_text's max_results has "minimum": not a plain schema, so such calls always go to
# the scanner; this copy without it lets the fast path convert integers too.
PLAIN_TOOLS: dict[str, Any] = {
    **TOOLS,
    "search_text": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer"},
            "case_sensitive": {"type": "boolean"},
        },
        "required": ["query"],
    },
}


def _scanned(text: str, tools: dict[str, Any], reason: str = "stop") -> Any:
    """What the scanner alone makes of ``text``: ("ok", ExecuteParse) or ("error", dict)."""
    parser = ExecuteStreamParser(tools, _stream=False)
    try:
        parser.feed(text)
        return ("ok", parser.finish(reason))
    except ProtocolError as err:
        return ("error", err.to_dict())


def _parsed(text: str, tools: dict[str, Any], reason: str = "stop") -> Any:
    try:
        return ("ok", parse_execute(text, tools=tools, finish_reason=reason))
    except ProtocolError as err:
        return ("error", err.to_dict())


def _check(text: str, tools: dict[str, Any]) -> bool:
    """parse_execute == the scanner; True if the fast path accepted the text."""
    scanned = _scanned(text, tools)
    assert _parsed(text, tools) == scanned
    fast = fast_execute(text, tools, "call")
    if fast is None:
        return False
    calls, think, notes, trailing, end = fast
    assert scanned == ("ok", ExecuteParse(calls, think, None, trailing, notes, end))
    return True


def test_every_vector_reads_the_same_on_both_paths() -> None:
    accepted = [p.stem for p, text in zip(VECTORS, TEXTS, strict=True) if _check(text, TOOLS)]
    # Not vacuous: the common shapes take the fast path.
    assert {"single_call", "think_ignored", "sequential_write_then_read"} <= set(accepted)


@pytest.mark.parametrize("reason", ["length", "content_filter", "max_tokens"])
def test_the_stop_reason_does_not_change_a_complete_block(reason: str) -> None:
    for text in TEXTS:
        assert _parsed(text, TOOLS, reason) == _scanned(text, TOOLS, reason)


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 20)))
        piece = draw(st.sampled_from(_PIECES) | st.text(max_size=4))
        text = text[:i] + piece + text[j if draw(st.booleans()) else i :]
    return text


_PIECES = [
    "<", ">", "&", "&amp;", "&lt;", "&#65;", "&#0;", "&bogus;", "</", "/>", "\n", "\r\n",
    " ", "\t", "<think>", "</think>", "<execute>", "</execute>", "<path>", "</path>",
    "<read_file>", "</read_file>", "<![CDATA[x]]>", "\ud800", "é", "5", "-1",
]  # fmt: skip


@PROPERTY
@given(_mutated())
def test_mutated_vectors_read_the_same_on_both_paths(text: str) -> None:
    _check(text, TOOLS)
    _check(text, PLAIN_TOOLS)


_BITS = ["a", "0", "7", "-2", " ", "\n", "\r\n", "\t", "&amp;", "&lt;", "&#x41;", "&nope;",
         "é", "true", "null", "[1]", '{"a": 1}', "\ud800", "1.5"]  # fmt: skip
_VALUE = st.lists(st.sampled_from(_BITS), max_size=5).map("".join)
_NAMES = ["path", "content", "query", "max_results", "case_sensitive", "recursive", "x",
          "paths", "note"]  # fmt: skip
_ARG = st.tuples(st.sampled_from(_NAMES), _VALUE)
_CALL = st.tuples(
    st.sampled_from([*sorted(TOOLS), "nope"]),
    st.lists(_ARG, min_size=1, max_size=3),
)
_GAP = st.sampled_from(["", "\n", " ", "\r\n  ", "\t"])


_TYPED = {
    "string": _VALUE,
    "integer": st.sampled_from(["5", "007", "-2", " 7", "+1", "x", "", "1.0"]),
    "number": st.sampled_from(["5", "2.5", "-1e3", "nan", "x"]),
    "boolean": st.sampled_from(["true", "False", " true", "1", ""]),
    "array": st.sampled_from(['["a"]', "[]", "[1]", "x", '"a"']),
    "object": st.sampled_from(['{"a": 1}', "{}", "[]", "x"]),
}


@st.composite
def _fitting_call(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    """A call that mostly fits its schema: required arguments, some optional ones."""
    tool = draw(st.sampled_from(sorted(PLAIN_TOOLS)))
    schema = PLAIN_TOOLS[tool]
    props = schema.get("properties", {})
    names = [n for n in props if n in schema.get("required", ()) or draw(st.booleans())]
    names = draw(st.permutations(names))
    args = []
    for name in names:
        kind = props[name].get("type", "string")
        kind = kind[0] if isinstance(kind, list) else kind
        args.append((name, draw(_TYPED[kind])))
    return tool, args


@st.composite
def _replies(draw: st.DrawFn, calls: st.SearchStrategy[Any] = _CALL) -> str:
    parts = [draw(st.sampled_from(["", "\n", "Sure. ", "a > b "]))]
    if draw(st.booleans()):
        parts += ["<think>", draw(st.sampled_from(["", "plan <path> first", " x "])), "</think>"]
        parts.append(draw(st.sampled_from(["", "\n", " then "])))
    parts.append("<execute>")
    for tool, args in draw(st.lists(calls, min_size=1, max_size=4)):
        if not args:  # <tool></tool> and <tool/> are the scanner's
            args = [("x", "")] if draw(st.booleans()) else []
        parts += [draw(_GAP), f"<{tool}>"]
        for name, value in args:
            parts += [draw(_GAP), f"<{name}>{value}</{name}>"]
        parts += [draw(_GAP), f"</{tool}>"]
    parts += [draw(_GAP), "</execute>", draw(st.sampled_from(["", "\n", " done", "<x>"]))]
    return "".join(parts)


@PROPERTY
@given(_replies() | _replies(_fitting_call()))
def test_generated_replies_read_the_same_on_both_paths(text: str) -> None:
    _check(text, TOOLS)
    _check(text, PLAIN_TOOLS)


def test_generated_replies_mostly_take_the_fast_path() -> None:
    text = "<think>x</think>\n<execute>\n<read_file><path>a.md</path></read_file>\n"
    text += "<search_text><query>q</query><max_results>5</max_results></search_text>\n"
    text += "<write_file><path>b</path><content>\nline &amp; more\n</content></write_file>\n"
    text += "</execute>\n"
    assert _check(text, PLAIN_TOOLS)
    assert not _check(text, TOOLS)  # max_results has a minimum: jsonschema's to check


@PROPERTY
@given(st.lists(st.sampled_from(["a", " ", "\t", "\n", "\r", "&amp;", "&#10;", "&", ";"])))
def test_layout_value_is_value_text_of_one_run(bits: list[str]) -> None:
    raw = "".join(bits)
    assert layout_value(raw) == value_text([(False, raw)])
