"""The store's per-note evidence (store/evidence.py) on a real DuckDB file: embeddings
cached by text, decisions kept per note, one row per changed note only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from toolwire.store import Store
from toolwire.store.evidence import CachingEmbedder, DecisionLedger, NoteRecord

pytestmark = pytest.mark.local


class CountingEmbedder:
    """A deterministic embedder that remembers every text it was asked to embed."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += list(texts)
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)


def test_a_text_is_embedded_once_per_embedder_and_kind(tmp_path: Path) -> None:
    store, inner = Store(tmp_path / "s.duckdb"), CountingEmbedder()
    first = CachingEmbedder(inner, store).embed_notes(["alpha", "beta", "alpha"])
    assert inner.seen == ["alpha", "beta"]  # a repeat inside one call is embedded once

    again = CachingEmbedder(inner, store)
    second = again.embed_notes(["beta", "gamma", "alpha"])
    assert inner.seen == ["alpha", "beta", "gamma"]
    assert (again.hits, again.misses, again.calls) == (2, 1, 1)
    np.testing.assert_array_equal(second[[0, 2]], first[[1, 0]])
    # The same text as a topic (query) is another vector: embedded again.
    CachingEmbedder(inner, store).embed_topics(["alpha"])
    assert inner.seen[-1] == "alpha" and len(inner.seen) == 4


def test_switching_embedders_embeds_each_text_once_per_embedder(tmp_path: Path) -> None:
    """The cache keys by embedder (and its package's version): a spec that switches
    engines re-embeds once, and switching back embeds nothing (issue 43)."""
    store, first, second = Store(tmp_path / "s.duckdb"), CountingEmbedder(), CountingEmbedder()
    second.name = "other"
    texts = ["alpha", "beta"]
    CachingEmbedder(first, store).embed_notes(texts)
    switched = CachingEmbedder(second, store)
    switched.embed_notes(texts)
    assert second.seen == texts and (switched.hits, switched.misses) == (0, 2)
    for inner in (second, first):
        again = CachingEmbedder(inner, store)
        again.embed_notes(texts)
        assert (again.hits, again.misses) == (2, 0)
    assert first.seen == second.seen == texts


def test_full_embeds_everything_again_and_refreshes_the_cache(tmp_path: Path) -> None:
    store, inner = Store(tmp_path / "s.duckdb"), CountingEmbedder()
    CachingEmbedder(inner, store).embed_notes(["alpha"])
    full = CachingEmbedder(inner, store, read=False)
    full.embed_notes(["alpha"])
    assert (full.hits, full.misses) == (0, 1) and inner.seen == ["alpha", "alpha"]
    _, rows = store.query("SELECT count(*) FROM embedding_cache")
    assert rows == [(1,)]


def test_the_ledger_writes_only_changed_notes_and_forgets_removed_ones(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    ledger = DecisionLedger(store, "/vault")
    a, b = NoteRecord("sha-a", "key-a", "keep", "cooking"), NoteRecord("sha-b", "k", "defer", None)
    assert ledger.save("run1", {"a": a, "b": b}, {}) == 2
    previous = ledger.load()
    assert previous == {"a": a, "b": b}
    assert ledger.save("run2", {"a": a, "b": b}, previous) == 0  # unchanged: no write
    edited = NoteRecord("sha-b2", "k2", "retag", "travel")
    assert ledger.save("run3", {"b": edited}, ledger.load()) == 1
    assert ledger.load() == {"b": edited}  # "a" left the vault: its row went with it
    _, rows = store.query("SELECT note_id, run_id FROM note_evidence")
    assert rows == [("b", "run3")]
    # Another workspace in the same store keeps its own records.
    assert DecisionLedger(store, "/other").load() == {}
