"""``protocols.text.Lines``: the line and column of many positions in one reply, in linear time.

The parsers that locate many things in one reply (invalid slot tags, leaked tool
calls, unknown librarian tags) share it; ``line_column`` per position made a reply
of many of them quadratic (128,000 leaked calls: 74 s of CPU, 0.7 s with ``Lines``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwire.protocols.attrless import parse_response
from toolwire.protocols.native import find_leaked_calls
from toolwire.protocols.text import Lines, line_column

pytestmark = pytest.mark.unit


@given(
    text=st.text(st.sampled_from("ab\n"), max_size=60),
    picks=st.lists(st.integers(0, 10_000), max_size=20),
)
def test_lines_agrees_with_line_column_in_any_order(text: str, picks: list[int]) -> None:
    lines = Lines(text)
    for pick in picks:
        pos = pick % (len(text) + 1)
        assert lines.at(pos) == line_column(text, pos)


class _Counted(str):
    """A reply that counts the characters ``count`` and ``rfind`` look at (no timing)."""

    looked = 0

    def _span(self, start: Any, end: Any) -> None:
        lo = 0 if start is None else start
        hi = len(self) if end is None else end
        _Counted.looked += max(0, hi - lo)

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        self._span(start, end)
        return str.count(self, sub, start, end)

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        self._span(start, end)
        return str.rfind(self, sub, start, end)


def _looked_at(parse: Any, text: str) -> float:
    _Counted.looked = 0
    parse(_Counted(text))
    return _Counted.looked / len(text)


def test_many_leaked_calls_are_located_in_one_pass() -> None:
    text = '<tool_call>{"name": "a"}</tool_call>\n' * 20_000
    assert len(find_leaked_calls(text).calls) == 20_000
    assert _looked_at(find_leaked_calls, text) <= 3  # each newline counted and found once


def test_many_unknown_librarian_tags_are_located_in_one_pass() -> None:
    head = "<librarian_response><request_id>r</request_id><status>ok</status>"
    tail = "<summary>s</summary><operations></operations><warnings></warnings>"
    text = head + "<x>1</x>\n" * 20_000 + tail + "</librarian_response>"
    assert len(parse_response(text).parse_warnings) == 20_000
    assert _looked_at(parse_response, text) <= 3
