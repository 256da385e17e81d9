"""A reply with more problems than a model can read lists the first ``MAX_LISTED`` and
counts the rest: a hostile reply of 300,000 empty operations made 2 million lines (846 MB).
An envelope of more elements than an answer needs is refused before its tree grows."""

from __future__ import annotations

import pytest

from toolwire.errors import ProtocolError
from toolwire.protocols.attrless import parse_response
from toolwire.protocols.attrless.scanner import MAX_ELEMENTS
from toolwire.protocols.execute import ANY_TOOL, parse_execute
from toolwire.protocols.text import Problems

CAP = Problems.MAX_LISTED


def _envelope(operations: int) -> str:
    return (
        "<librarian_response><request_id>r</request_id><status>ok</status><summary>s</summary>"
        "<operations>" + "<operation></operation>" * operations + "</operations>"
        "<warnings></warnings></librarian_response>"
    )


def _error(call: object) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        call()  # type: ignore[operator]
    return caught.value


def test_attrless_lists_the_first_problems_and_counts_the_rest() -> None:
    few = _error(lambda: parse_response(_envelope(2)))
    per_operation = len(few.details) // 2  # every empty operation has the same problems
    many = _error(lambda: parse_response(_envelope(CAP)))
    assert len(many.details) == CAP + 1
    assert many.details[:2] == few.details[:2]
    more = CAP * per_operation - CAP
    assert many.details[-1] == f"MORE_PROBLEMS:{more}"
    assert many.message.endswith(f"... and {more} more problems of the same kinds.")
    assert many.message.count("\n") == CAP


def test_execute_lists_the_first_problems_and_counts_the_rest() -> None:
    tools = {"known": {"type": "object"}}
    block = "<execute>" + "<nope/>" * (CAP + 5) + "</execute>"
    error = _error(lambda: parse_execute(block, tools=tools))
    assert error.details[:CAP] == ["UNKNOWN_TOOL:nope"] * CAP
    assert error.details[CAP:] == ["MORE_PROBLEMS:5"]
    assert parse_execute("<execute><nope/></execute>", tools=ANY_TOOL).calls[0].tool == "nope"


def test_a_repeated_problem_is_listed_once_when_asked() -> None:
    problems = Problems()
    for _ in range(3):
        problems.add("A", "line a", 7, once=True)
    problems.add("B", "line b", 9)
    with pytest.raises(ProtocolError) as caught:
        problems.raise_any("CODE", "x" * 10)
    assert caught.value.details == ["A", "B"]
    assert (caught.value.line, caught.value.column) == (1, 8)


def test_attrless_refuses_more_elements_than_an_answer_needs() -> None:
    # root, request_id, status, summary, operations, warnings: 6 elements besides operations
    at_limit = _error(lambda: parse_response(_envelope(MAX_ELEMENTS - 6)))
    assert at_limit.code == "LIBRARIAN_PARSE_FAILED"
    over = _error(lambda: parse_response(_envelope(MAX_ELEMENTS - 5)))
    assert (over.code, over.details, over.line) == (
        "LIBRARIAN_PROTOCOL_INVALID",
        ["TOO_MANY_ELEMENTS"],
        1,
    )
    assert f"is element {MAX_ELEMENTS + 1} of this answer" in over.message
