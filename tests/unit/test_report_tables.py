"""The attempts table and cells both jobs' Markdown reports print (run/report_tables.py)."""

from __future__ import annotations

import pytest

from toolwire.domain import Attempt
from toolwire.run.report_tables import attempts_table, cell

pytestmark = pytest.mark.unit


def _attempt(attempt: int, ok: bool, code: str | None, codes: tuple[str, ...]) -> Attempt:
    return Attempt(
        turn=1, attempt=attempt, kind="repair" if attempt else "initial", request_id="r",
        prompt=[], raw_text="x", parse_ok=ok, error_code=code, error_codes=codes,
        input_tokens=None if attempt else 12, output_tokens=3, latency_ms=41.6,
        finish_reason="stop", started_at=0.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("a | b", 80, "a \\| b"),
        ("line\nbreak\t tab", 80, "line break tab"),
        ("abcdef", 4, "abc…"),
        (None, 80, ""),
    ],
)
def test_a_cell_is_one_bounded_line_with_pipes_escaped(
    text: object, limit: int, expected: str
) -> None:
    assert cell(text, limit) == expected


def test_the_attempts_table_has_a_row_per_reply_and_names_its_usable_column() -> None:
    rows = [
        _attempt(0, False, "LIBRARIAN_PROTOCOL_INVALID", ("MISSING_TAG",)),
        _attempt(1, True, None, ()),
    ]
    assert attempts_table(rows, parsed="usable") == [
        "",
        "## Attempts",
        "",
        "| turn | attempt | kind | usable | codes | tokens in/out | ms |",
        "|---|---|---|---|---|---|---|",
        "| 2 | 0 | initial | no | LIBRARIAN_PROTOCOL_INVALID, MISSING_TAG | 12/3 | 42 |",
        "| 2 | 1 | repair | yes |  | 0/3 | 42 |",
    ]
