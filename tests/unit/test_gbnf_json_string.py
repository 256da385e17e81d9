"""The grammar's JSON strings never hold "</" (a closing tag the transport's parser would
end the call at); a "<" before anything else, and "/" alone, stay allowed.

The json-char rule's own text is read as a regular expression (its alternatives are GBNF
string literals and character classes, whose syntax Python's ``re`` shares), so this
checks the grammar the providers get, not a copy of it."""

from __future__ import annotations

import re

import pytest

from toolwire.gbnf import _JSON_RULES, _decode_literal

pytestmark = pytest.mark.unit


def _as_regex(body: str) -> re.Pattern[str]:
    parts = []
    for alternative in body.split(" | "):
        pieces = re.findall(r'"((?:[^"\\]|\\.)*)"|(\[(?:\\.|[^\]\\])*\])', alternative)
        assert pieces, alternative
        parts.append(
            "".join(re.escape(_decode_literal(lit)) if lit else cls for lit, cls in pieces)
        )
    return re.compile("(?:" + "|".join(parts) + ")*")


JSON_CHAR = _as_regex(dict(_JSON_RULES)["json-char"])


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ("hello world", True),
        ("a/b and c/d", True),
        ("a < b", True),
        ("<b>bold", True),
        ('line\\nnext \\"q\\"', True),
        ("</tool_call>", False),
        ("x</ai-agent-0a1b>", False),
        ("<</x", False),
        ('say "hi"', False),  # a bare quote ends the string
    ],
)
def test_json_string_body(text: str, admitted: bool) -> None:
    assert bool(JSON_CHAR.fullmatch(text)) is admitted
