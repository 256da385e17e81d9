"""A run's outcome says what was proven (issue 46): file and answer checks, and
``unchecked`` when the spec declares none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from toolwire.agent.checks import UNCHECKED, run_outcome
from toolwire.domain import FinalReport
from toolwire.spec.model import CheckSpec

pytestmark = pytest.mark.unit


def _answer(content: Any) -> FinalReport:
    return FinalReport(status="success", format="text", content=content, metadata={})


# (check, answer content, file text of city.txt or None, expected problem fragment or None)
CASES: list[tuple[dict[str, Any], Any, str | None, str | None]] = [
    ({"answer_matches": "(?i)paris"}, "The city is Paris.", None, None),
    ({"answer_matches": "(?i)paris"}, "The task was completed.", None, "does not match"),
    ({"answer_matches": r"\d+ files"}, {"summary": "3 files"}, None, None),
    ({"answer_schema": {"type": "object", "required": ["city"]}}, '{"city": "Oslo"}', None, None),
    ({"answer_schema": {"type": "object", "required": ["city"]}}, {"city": "Oslo"}, None, None),
    ({"answer_schema": {"type": "object", "required": ["city"]}}, "Oslo", None, "JSON Schema"),
    (
        {"answer_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        {"n": "three"},
        None,
        "at n",
    ),
    ({"file": "city.txt", "contains": "Paris"}, "done", "Paris\n", None),
    ({"file": "city.txt", "contains": "Paris"}, "done", "Oslo\n", "does not contain 'Paris'"),
    ({"file": "city.txt", "contains": "Paris"}, "done", None, "does not exist"),
    ({"file": "city.txt"}, "done", "", None),
]


@pytest.mark.parametrize(("check", "content", "file_text", "expected"), CASES)
def test_a_check_holds_or_says_what_is_missing(
    tmp_path: Path, check: dict[str, Any], content: Any, file_text: str | None, expected: str | None
) -> None:
    if file_text is not None:
        (tmp_path / "city.txt").write_text(file_text, encoding="utf-8")
    status, error = run_outcome([CheckSpec.model_validate(check)], tmp_path, _answer(content))
    if expected is None:
        assert (status, error) == ("ok", None)
    else:
        assert status == "Failed" and error is not None
        assert error.code == "RUN_CHECK_FAILED" and expected in error.message


def test_an_answer_check_without_an_answer_fails(tmp_path: Path) -> None:
    status, error = run_outcome([CheckSpec(answer_matches="x")], tmp_path, None)
    assert status == "Failed" and error is not None and "no final answer" in error.message


def test_a_spec_without_checks_ends_unchecked_never_ok(tmp_path: Path) -> None:
    assert run_outcome([], tmp_path, _answer("Done.")) == (UNCHECKED, None)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ({}, "exactly one of"),
        ({"file": "a.md", "answer_matches": "x"}, "exactly one of"),
        ({"answer_matches": "x", "contains": "y"}, "give file too"),
        ({"answer_matches": "(unclosed"}, "not a regular expression"),
        ({"answer_schema": {"type": "nonsense"}}, "answer_schema"),
        ({"file": "../out.md", "contains": "y"}, "climbs out"),
    ],
)
def test_a_check_the_spec_cannot_mean_is_refused(check: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CheckSpec.model_validate(check)
