"""The repair prompt echoes the model's reply: whole when short, its ends when huge."""

from __future__ import annotations

import pytest

from toolwire.librarian.repair import MAX_REPAIR_ECHO_CHARS, echo_for_repair

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("size", [0, 1, MAX_REPAIR_ECHO_CHARS])
def test_a_reply_up_to_the_limit_is_echoed_whole(size: int) -> None:
    text = ("<a>é" * size)[:size]
    assert echo_for_repair(text) == text


def test_a_huge_reply_keeps_both_ends_and_says_how_much_was_cut() -> None:
    head, tail = "<librarian_response>" + "h" * 9_000, "t" * 9_000 + "</librarian_response>"
    text = head + "x" * 50_000_000 + tail
    echo = echo_for_repair(text)
    assert echo.startswith(head[: MAX_REPAIR_ECHO_CHARS // 2])
    assert echo.endswith(tail[-MAX_REPAIR_ECHO_CHARS // 2 :])
    assert f"[... {len(text) - MAX_REPAIR_ECHO_CHARS} characters cut" in echo
    assert len(echo) < MAX_REPAIR_ECHO_CHARS + 100
