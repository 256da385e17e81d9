"""A slot cut at its token limit inside its end tag keeps no partial tag (issue 28:
a title ending in ``</`` was applied)."""

from __future__ import annotations

import pytest

from toolwire.providers.llama_worker import _without_partial_end

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("Disk full</", "Disk full"),
        ("Disk full</tit", "Disk full"),
        ("Disk full<", "Disk full"),
        ("Disk full", "Disk full"),
        ("a < b", "a < b"),  # a "<" inside the text is not the end tag's start
        ("", ""),
        ("</title", ""),
    ],
)
def test_a_partial_end_tag_is_dropped_before_the_end_is_appended(written: str, kept: str) -> None:
    assert _without_partial_end(written, "</title>") == kept
