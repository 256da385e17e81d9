"""What the vault's user has shown the scorer, and the order of questions (vault_evidence.py).

Hand-made unit vectors: three tight clouds, one per topic, so each property is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolwire.librarian.judge.vault_evidence import (
    MIN_SHOWN_TOPICS,
    NEAR,
    backed_topics,
    question_order,
)

pytestmark = pytest.mark.unit


def _cloud(center: tuple[float, ...], n: int, seed: int, spread: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = np.asarray(center, dtype=np.float64) + spread * rng.standard_normal((n, len(center)))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


VECTORS = np.vstack(
    [_cloud((1, 0, 0, 0), 5, 1), _cloud((0, 1, 0, 0), 5, 2), _cloud((0, 0, 1, 0), 5, 3)]
)
TRUTH = np.repeat([0, 1, 2], 5)


def test_nothing_is_backed_until_the_user_has_shown_enough_topics() -> None:
    assert MIN_SHOWN_TOPICS == 3
    labels = np.full(15, -1)
    assert not backed_topics(VECTORS, labels, 3).any()  # a vault with no evidence: ask
    labels[[0, 5]] = [0, 1]  # two topics shown: still too few to choose among
    assert not backed_topics(VECTORS, labels, 3).any()
    labels[10] = 2
    backed = backed_topics(VECTORS, labels, 3)
    free = labels < 0
    # Each unlabelled note is backed for exactly its own cloud's topic.
    assert (backed[free].argmax(axis=1) == TRUTH[free]).all()
    assert (backed[free].sum(axis=1) == 1).all()


def test_a_labelled_note_is_not_its_own_evidence() -> None:
    labels = np.full(15, -1)
    labels[[0, 5, 10, 11]] = [0, 1, 2, 2]
    backed = backed_topics(VECTORS, labels, 3)
    # Note 0 is topic 0's only example: left out, topic 0 has no centroid for it, so
    # its own tag cannot back itself (and with two topics left nothing is backed).
    assert not backed[0].any()
    # Note 10 still has note 11 for its topic: backed by the other example.
    assert backed[10, 2]


def test_first_questions_cover_the_topics_nobody_has_shown() -> None:
    labels = np.full(15, -1)
    labels[0] = 0  # topic 0 shown already
    probs = np.full((15, 3), 0.1)
    probs[np.arange(15), TRUTH] = 0.8
    probs[7, 1] = 0.9  # the most typical note of topic 1
    order, decides = question_order(VECTORS, probs, labels, labels < 0)
    assert sorted(order) == [i for i in range(15) if i != 0]
    assert order[0] == 7 or order[1] == 7
    assert {TRUTH[order[0]], TRUTH[order[1]]} == {1, 2}
    # A cloud's notes are all within NEAR of each other: one answer covers its cloud.
    assert (VECTORS[5:10] @ VECTORS[5:10].T).min() >= NEAR
    assert decides[7] == 5
    # Topic 0's cloud already has an example nearer than any question: an answer there
    # decides only its own note.
    assert all(decides[i] == 1 for i in range(1, 5))


def test_after_the_topics_the_question_that_covers_most_comes_first() -> None:
    big = _cloud((0, 0, 0, 1), 6, 4)
    vectors = np.vstack([VECTORS, big])
    truth = np.concatenate([TRUTH, np.full(6, 2)])
    labels = np.full(21, -1)
    labels[[0, 5, 10]] = [0, 1, 2]  # every topic shown
    probs = np.full((21, 3), 0.2)
    probs[np.arange(21), truth] = 0.6
    order, decides = question_order(vectors, probs, labels, labels < 0)
    assert order[0] >= 15  # the unexplored cloud of six teaches most
    assert decides[order[0]] == 6
    # Once the cloud is covered, its other notes decide only themselves.
    assert all(decides[i] == 1 for i in order[1:] if i >= 15)
