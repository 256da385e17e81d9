"""What this vault's user has shown the scorer, and what to ask them next (issue 41).

The scorer's confidence is fitted on corpora it was tuned on; on a taxonomy it has never
seen it is not honest (TIL notes: 0.8-0.9 right 81 %). Two things here make it trust only
what the vault itself has shown, and make each answer count:

- **backed**: a topic may be applied to a note only when a view built from the user's
  evidence alone (their tagged and answered notes; a run's own tags never count) points
  the same way: the note's nearest centroid of the user's examples, the note itself left
  out, is that topic. A vault with no such evidence yet (or for fewer than
  ``MIN_SHOWN_TOPICS`` topics) gets nothing applied: its first run only asks.
- **question order**: the first questions cover the topics the user has not shown yet
  (for each, the note that looks most like it), then each next question is the one whose
  answer would bring the most uncertain notes under a user example (a note within
  ``NEAR`` of the answered one, and of no example or earlier question).
  ``decides`` is that count plus the note itself: what ``toolwire review`` says an answer
  is expected to decide.
"""

from __future__ import annotations

import numpy as np

from toolwire.embedders.rows import unit as unit_vectors

__all__ = ["MIN_SHOWN_TOPICS", "NEAR", "backed_topics", "question_order"]

# The user's evidence must cover this many topics before any topic is applied: with one
# or two, "the nearest of the user's centroids" is a choice among too few to mean much.
MIN_SHOWN_TOPICS = 3
# Two notes this close (cosine of their pooled e5 vectors) count as one region: an answer
# about one is expected to decide the other.
NEAR = 0.85
# The greedy order looks at this many questions at most (the most uncertain); the rest
# follow by uncertainty (nobody answers thousands, and the pairwise table is n^2).
MAX_GREEDY = 1000


def backed_topics(vectors: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """(notes, topics) booleans: the topic is the note's nearest centroid of the user's own
    examples (``labels``: topic index per note, -1 none), the note itself left out. All
    False while the user has shown fewer than ``MIN_SHOWN_TOPICS`` topics."""
    n = len(labels)
    out = np.zeros((n, k), dtype=bool)
    own = np.flatnonzero(labels >= 0)
    if len(set(labels[own].tolist())) < MIN_SHOWN_TOPICS:
        return out
    members = np.zeros((n, k))
    members[own, labels[own]] = 1.0
    sums = vectors.T @ members  # (dims, topics)
    count = np.tile(members.sum(axis=0), (n, 1))
    dots = vectors @ sums
    norms2 = np.tile((sums**2).sum(axis=0), (n, 1))
    j = labels[own]
    norms2[own, j] += 1.0 - 2.0 * dots[own, j]  # the note's own unit vector leaves its sum
    dots[own, j] -= 1.0
    count[own, j] -= 1.0
    cos = np.where(count > 0, dots / np.sqrt(np.clip(norms2, 1e-18, None)), -np.inf)
    nearest = cos.argmax(axis=1)
    has = np.isfinite(cos).sum(axis=1) >= MIN_SHOWN_TOPICS
    out[np.flatnonzero(has), nearest[has]] = True
    return out


def question_order(
    vectors: np.ndarray, probs: np.ndarray, labels: np.ndarray, asked: np.ndarray
) -> tuple[list[int], dict[int, int]]:
    """The notes to ask about (``asked``: booleans), most teaching first, and how many notes
    each answer is expected to decide (itself included).

    First one note per topic the user has not shown (the asked note most probable for it,
    topics that more notes lean to first), then greedily the note whose answer brings the
    most uncertainty (1 - confidence) under a user example: notes within ``NEAR`` of it and
    of no example or earlier question."""
    k = probs.shape[1]
    pool = [int(i) for i in np.flatnonzero(asked)]
    if not pool:
        return [], {}
    pool.sort(key=lambda i: (probs[i].max(), i))  # most uncertain first
    tail, pool = pool[MAX_GREEDY:], pool[:MAX_GREEDY]
    shown = set(labels[labels >= 0].tolist())
    order: list[int] = []
    for t in sorted(set(range(k)) - shown, key=lambda t: (-probs[:, t].sum(), t)):
        left = [i for i in pool if i not in order]
        if not left:
            break
        order.append(max(left, key=lambda i: (probs[i, t], -i)))
    vecs = unit_vectors(np.asarray(vectors, dtype=np.float64))
    sims = vecs[pool] @ vecs[pool].T
    examples = np.flatnonzero(labels >= 0)
    nearest = (
        (vecs[pool] @ vecs[examples].T).max(axis=1) if len(examples) else np.full(len(pool), -1.0)
    )
    position = {i: p for p, i in enumerate(pool)}
    uncertainty = 1.0 - probs[pool].max(axis=1)
    decides: dict[int, int] = {}

    def gain(p: int) -> np.ndarray:
        return (sims[p] >= NEAR) & (nearest < NEAR)

    for i in order:  # the topic questions, counted as the greedy ones are
        newly = gain(position[i])
        decides[i] = 1 + int(newly.sum()) - int(newly[position[i]])
        nearest = np.maximum(nearest, sims[position[i]])
    left = [position[i] for i in pool if i not in decides]
    while left:
        rows = sims[np.ix_(left, left)]
        covered = (rows >= NEAR) & (nearest[left][None, :] < NEAR)
        value = (covered * uncertainty[left][None, :]).sum(axis=1)
        best = int(np.argmax(value))
        p = left.pop(best)
        newly = gain(p)
        decides[pool[p]] = 1 + int(newly.sum()) - int(newly[p])
        order.append(pool[p])
        nearest = np.maximum(nearest, sims[p])
    decides.update((i, 1) for i in tail)
    return order + tail, decides
