"""Each bundled embedding engine, loaded for real: unit vectors in the caller's order,
the same vector for a text alone or in a batch, on the threads it was given."""

from __future__ import annotations

import numpy as np
import pytest

from toolwire.embedders import EMBEDDERS, installed, load_embedder

pytestmark = pytest.mark.local

TEXTS = [
    "Rebase a feature branch onto main and force-push it after resolving conflicts.",
    "nginx",
    "Tax checklist: receipts, deductions; the return is due in April. " * 30,  # truncated
    "Sourdough: feed the starter, autolyse the flour, bake in a hot Dutch oven.",
]
TOPICS = ["git version control", "web servers", "personal finance", "cooking and recipes"]


@pytest.mark.parametrize("name", list(EMBEDDERS))
def test_an_engine_reads_topics_in_the_callers_order(name: str) -> None:
    if not installed(name):
        pytest.skip(f"{name} is not installed (toolwire[local])")
    embedder = load_embedder(name, threads=2)
    assert embedder is not None and embedder.name == name
    notes = embedder.embed_notes(TEXTS)
    assert notes.shape[0] == len(TEXTS) and notes.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(notes, axis=1), 1.0, atol=1e-5)
    # Batched (sorted by length inside) and alone: the same vector, in the same row.
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(embedder.embed_notes([text])[0], notes[i], atol=2e-3)
    similarity = notes[[0, 2, 3]] @ embedder.embed_topics(TOPICS).T
    assert list(similarity.argmax(axis=1)) == [0, 2, 3]


def test_one_thread_and_two_give_the_same_vectors() -> None:
    if not installed("minilm"):
        pytest.skip("minilm is not installed (toolwire[local])")
    one, two = (load_embedder("minilm", threads=n) for n in (1, 2))
    assert one is not None and two is not None
    np.testing.assert_allclose(one.embed_notes(TEXTS), two.embed_notes(TEXTS), atol=1e-4)
