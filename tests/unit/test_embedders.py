"""The embedder registry (toolwire.embedders): names, the thread setting, its errors."""

from __future__ import annotations

import os

import pytest

from toolwire.embedders import EMBEDDERS, REQUIRES, THREADS_ENV, embed_threads, load_embedder
from toolwire.errors import USAGE_ERROR, UsageError

pytestmark = pytest.mark.unit


def test_every_core_unless_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert embed_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(THREADS_ENV, "3")
    assert embed_threads() == 3


@pytest.mark.parametrize("raw", ["0", "-2", "two", "1.5"])
def test_a_bad_thread_count_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(THREADS_ENV, raw)
    with pytest.raises(UsageError) as caught:
        embed_threads()
    assert caught.value.code == USAGE_ERROR and THREADS_ENV in caught.value.message


def test_an_unknown_embedder_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match="minilm, e5-small, none"):
        load_embedder("bge-huge")
    assert load_embedder("none") is None


def test_every_engine_says_what_it_needs() -> None:
    assert set(REQUIRES) == set(EMBEDDERS)
