"""The C speedups (toolwire/protocols/_speedups.c) against plain-Python references.

``read_slot_tags`` is checked against ``reference_read`` below (written for
reading, not speed) on generated replies in all three string widths, on every
truncation of them, and on arbitrary text; ``Maker`` against the classes' own
constructors. The slot parser's equivalence with the scanner, through the C
reader, is in test_slots.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.domain import LibrarianResponse, Operation, ToolCall
from toolwire.protocols import _bulk, _slotfast
from toolwire.protocols._bulk import twin
from toolwire.protocols._slotfast import reader
from toolwire.protocols.slots import FinalTag, SlotParse, _new_parse

pytestmark = pytest.mark.unit

try:
    from toolwire.protocols import _speedups
except ImportError:  # the first test says so; the rest fail on the name
    _speedups = None  # type: ignore[assignment]

NONCE = "ai-agent-1a2b3c4d"
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_speedups_are_built() -> None:
    """./scripts/install builds them (setup.py); without a C compiler it cannot, and the
    pure-Python paths run, slower. The test command's machine has one."""
    assert _speedups is not None, "toolwire.protocols._speedups missing: run ./scripts/install"


# ---- read_slot_tags ------------------------------------------------------------------

_N = re.escape(NONCE)
_CALL = re.compile(rf'<({_N}-[0-9]{{4}}) tool="([^"<>\s]+)">(\{{[^<]*)</\1>')
_FINAL = re.compile(rf'<{_N}-FINAL status="([^"<>\s]+)" format="([^"<>\s]+)">([^<]*)</{_N}-FINAL>')


def _colons_outside_strings(content: str) -> int:
    count, in_string, escaped = 0, False, False
    for ch in content:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == ":":
            count += 1
    return count


def reference_read(text: str, nonce: str) -> Any:
    """What read_slot_tags returns, by the definition in _speedups.c's header."""
    assert nonce == NONCE
    slots: list[str] = []
    tools: list[str] = []
    contents: list[str] = []
    final: tuple[str, ...] | None = None
    colons, pos = 0, 0
    while (lt := text.find("<", pos)) >= 0:
        if m := _CALL.match(text, lt):
            if re.search("[0-9]{19}", m.group(3)):
                return None
            slots.append(m.group(1))
            tools.append(m.group(2))
            contents.append(m.group(3))
            colons += _colons_outside_strings(m.group(3))
        elif (m := _FINAL.match(text, lt)) and final is None:
            final = m.groups()
        else:
            return None
        pos = m.end()
    return slots, tools, contents, final, colons


WIDE = ["é", "ā", "😀", "\u00a0", "\u2028"]  # 1-, 2- and 4-byte strings; odd white space
SLOT = st.sampled_from(["0001", "0002", "0042", "001", "00010", "٠١٢٣", "FINAL", "PROGRESS"])
ATTRS = st.sampled_from(
    [
        'tool="read_file"',
        'tool="ā"',
        'tool="😀"',
        'tool=""',
        'tool="a b"',
        'tool="a\u00a0b"',
        'tool="a>b"',
        "tool='x'",
        'status="success" format="text"',
        'status="" format="text"',
        'status="ok" format="json"',
        'status="a\tb" format="text"',
        "",
    ]
)
BODY = st.sampled_from(
    [
        '{"path": "a.md"}',
        '{"url": "http://x:1", "t": "10:30"}',
        '{"q": "\\":\\"", "n": 1}',
        '{"q": "\\\\", "a": {"b": 2}}',
        '{"n": 123456789012345678}',
        '{"n": 1234567890123456789}',
        '{"n": 12345678901234567.8901}',
        '{"k": "ā:😀"}',
        '{"q": "\\1", "n": 1}',  # a digit after a backslash (found by fuzzing): escaped
        "{",
        "",
        "Done.",
        "  ",
        "not json: at all",
    ]
)
BETWEEN = st.sampled_from(["", "\n", " text: 1 ", ">", "<", "</", *WIDE])


GOOD_BETWEEN = st.sampled_from(["", "\n", " text: 1 ", ">", *WIDE])


@st.composite
def replies(draw: st.DrawFn) -> str:
    """Mostly canonical tags (so that many replies are read), some broken in one place."""
    parts = [draw(GOOD_BETWEEN)]
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.integers(0, 4)):  # a canonical call or final report
            slot = draw(st.sampled_from(["0001", "0002", "0042", "FINAL"]))
            if slot == "FINAL":
                attrs = 'status="success" format="text"'
                body = draw(st.sampled_from(["Done.", "", "a: b", *WIDE]))
            else:
                attrs = draw(st.sampled_from(['tool="read_file"', 'tool="ā"', 'tool="😀"']))
                body = draw(BODY.filter(lambda b: b.startswith("{")))
            close, after = slot, draw(GOOD_BETWEEN)
        else:
            slot, attrs, body, after = draw(SLOT), draw(ATTRS), draw(BODY), draw(BETWEEN)
            close = slot if draw(st.integers(0, 3)) else draw(SLOT)
        opener = f"<{NONCE}-{slot}{' ' + attrs if attrs else ''}>"
        parts += [opener, body, f"</{NONCE}-{close}>", after]
    return "".join(parts)


@PROPERTY
@given(text=replies())
def test_read_slot_tags_agrees_with_the_reference(text: str) -> None:
    assert _speedups.read_slot_tags(text, NONCE) == reference_read(text, NONCE)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=replies(), wide=st.sampled_from(["", *WIDE]))
def test_read_slot_tags_on_every_truncation(text: str, wide: str) -> None:
    """Every prefix of a reply (and in every string width): no read past the end."""
    text = wide + text
    for end in range(len(text) + 1):
        assert _speedups.read_slot_tags(text[:end], NONCE) == reference_read(text[:end], NONCE)


@PROPERTY
@given(
    text=st.text() | st.text(alphabet=st.sampled_from(["<", ">", '"', "/", "-", ":", "{", *NONCE]))
)
def test_read_slot_tags_on_any_text(text: str) -> None:
    assert _speedups.read_slot_tags(text, NONCE) == reference_read(text, NONCE)


BASE = (
    f'x<{NONCE}-0001 tool="read_file">{{"path": "a:b.md", "n": 12345}}</{NONCE}-0001>\n'
    f'<{NONCE}-FINAL status="success" format="text">Done.</{NONCE}-FINAL>'
    f'<{NONCE}-0002 tool="ā">{{"q": "\\":"}}</{NONCE}-0002>'
)
EDIT_CHARS = ["<", ">", '"', "/", "-", ":", "{", "\\", "0", "9", "é", "ā", "😀", " ", "\u00a0"]


@PROPERTY
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(BASE)), st.sampled_from("rid"), st.sampled_from(EDIT_CHARS)),
        min_size=1,
        max_size=4,
    )
)
def test_read_slot_tags_on_edited_replies(edits: list[tuple[int, str, str]]) -> None:
    """A few characters replaced, inserted or deleted anywhere in a reply it reads."""
    chars = list(BASE)
    for at, op, ch in edits:
        at = min(at, len(chars) - 1)
        if op == "r":
            chars[at] = ch
        elif op == "i":
            chars.insert(at, ch)
        else:
            del chars[at]
    text = "".join(chars)
    assert _speedups.read_slot_tags(text, NONCE) == reference_read(text, NONCE)


def test_read_slot_tags_reads_a_usual_reply() -> None:
    """Not vacuous: the generated replies include ones it reads."""
    reply = (
        f'Reading.\n<{NONCE}-0001 tool="read_file">{{"path": "a:b.md"}}</{NONCE}-0001>\n'
        f'<{NONCE}-FINAL status="success" format="text">Done: 1 note.</{NONCE}-FINAL>'
    )
    got = _speedups.read_slot_tags(reply, NONCE)
    assert got == (
        [f"{NONCE}-0001"],
        ["read_file"],
        ['{"path": "a:b.md"}'],
        ("success", "text", "Done: 1 note."),
        1,
    )
    assert got == reference_read(reply, NONCE)


def test_read_slot_tags_refuses_bad_arguments() -> None:
    with pytest.raises(TypeError):
        _speedups.read_slot_tags(b"<x>", NONCE)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _speedups.read_slot_tags("<x>")  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        _speedups.read_slot_tags("<x>", "ai-agent-é")
    with pytest.raises(ValueError):
        _speedups.read_slot_tags("<x>", "")


def test_colons_inside_strings_keep_the_compiled_fast_path() -> None:
    """The C reader counts only the colons outside strings: URLs and times stay fast."""
    read = reader(NONCE, _new_parse, compiled=True)
    args = {"path": "http://x/a:b.md", "at": "10:30", "q": 'say "a:b"'}
    text = f'<{NONCE}-0001 tool="read_file">{json.dumps(args)}</{NONCE}-0001>'
    got = read(text + text.replace("0001", "0002"), None, None, "xml")
    assert got is not None and [call.args for call in got.calls] == [args, args]
    repeated = text.replace('"at"', '"path"')  # the same count of colons, a key twice
    assert read(repeated, None, None, "xml") is None


# ---- Maker ---------------------------------------------------------------------------

_OP = Operation("op_1", "retag_note", "a", None, "T", "x\ny", "why", 0.5)
_RESPONSE = LibrarianResponse("req_1", "ok", "s", (_OP,), ())


def _values(obj: Any) -> tuple[Any, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


EXAMPLES: list[tuple[type, tuple[Any, ...]]] = [
    (ToolCall, ("c1", "read_file", {"path": "a.md"}, "xml", "ai-agent-1a2b3c4d-0001")),
    (FinalTag, ("success", "text", "Done.", False, "ai-agent-1a2b3c4d-FINAL")),
    (SlotParse, ([], None, None, [], "xml", ())),
    (Operation, _values(_OP)),
    (LibrarianResponse, _values(_RESPONSE)),
]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("cls, values", EXAMPLES, ids=[c.__name__ for c, _ in EXAMPLES])
def test_twin_builds_what_the_constructor_builds(
    cls: type, values: tuple[Any, ...], compiled: bool
) -> None:
    made = twin(cls, compiled=compiled)(*values)
    expected = cls(*values)
    assert type(made) is cls and made == expected and repr(made) == repr(expected)
    field = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, field, "other")


def test_maker_refuses_what_it_cannot_build() -> None:
    make = twin(ToolCall, compiled=True)
    with pytest.raises(TypeError, match="5 positional arguments, got 4"):
        make("c1", "t", {}, "xml")
    with pytest.raises(TypeError):
        make("c1", "t", {}, "xml", None, extra=1)
    members = tuple(FinalTag.__dict__[f] for f in FinalTag.__slots__)
    with pytest.raises(TypeError):  # FinalTag's slots do not apply to a ToolCall
        _speedups.Maker(ToolCall, members)("a", "b", "c", False, "d")
    with pytest.raises(TypeError):
        _speedups.Maker(ToolCall, ("not a descriptor",))
    with pytest.raises(TypeError):
        _speedups.Maker("not a class", ())  # type: ignore[arg-type]


def test_without_the_speedups_the_python_paths_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a machine without a C compiler gets: the regex reader and the twin classes."""
    monkeypatch.setattr(_slotfast, "read_slot_tags", None)
    monkeypatch.setattr(_bulk, "Maker", None)
    with pytest.raises(RuntimeError, match="not built"):
        reader(NONCE, _new_parse, compiled=True)
    with pytest.raises(RuntimeError, match="not built"):
        twin(ToolCall, compiled=True)
    read = reader(NONCE, _new_parse)
    assert read.__name__ == "read"  # the regex reader
    reply = f'<{NONCE}-0001 tool="read_file">{{"path": "a.md"}}</{NONCE}-0001>'
    got = read(reply, None, None, "xml")
    assert got is not None and got.calls[0].args == {"path": "a.md"}
    assert (
        type(twin(ToolCall)) is type and type(twin(ToolCall)("a", "b", {}, "xml", None)) is ToolCall
    )
