"""Related notes from the evidence toolwire already keeps: each note's embedding, the
links between notes and their topics.

score(i, j) = cosine(i, j)
            + BACKLINK_WEIGHT  if j links to i (a backlink the user wrote)
            + SHARED_WEIGHT * Adamic-Adar(i, j) (notes both link with, rarer ones count more)
            + TOPIC_WEIGHT     if both carry the same topic

Notes ``i`` already links to are not suggested (the reader has them). The weights are
small next to the spread of e5 cosines and not yet validated:
bench/related_notes.py measures recall@5 of held-back links against plain cosine
(bench/RESULTS.md, issue 44; on its one-way-linked docs vault they do not help).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolwire.embedders.rows import unit as unit_vectors

__all__ = ["BACKLINK_WEIGHT", "SHARED_WEIGHT", "TOPIC_WEIGHT", "rank_related"]

BACKLINK_WEIGHT = 0.10
SHARED_WEIGHT = 0.05
TOPIC_WEIGHT = 0.02
_ROWS = 512  # rows scored at once: memory stays O(rows x notes), not O(notes^2)


def rank_related(
    vectors: np.ndarray,
    links: Sequence[set[int]],
    topics: Sequence[str | None],
    *,
    k: int,
    min_score: float,
    evidence: bool = True,
) -> list[list[tuple[int, float]]]:
    """For each note, up to ``k`` (index, score) best first, above ``min_score``.

    ``links[i]``: indexes note ``i`` links to. ``evidence=False`` is plain cosine (the
    benchmark's baseline); already-linked notes are left out either way."""
    n = len(links)
    unit = unit_vectors(np.asarray(vectors, dtype=np.float64))
    out: list[list[tuple[int, float]]] = []
    undirected = [set(s) for s in links]
    for i, targets in enumerate(links):
        for j in targets:
            undirected[j].add(i)
    # Adamic-Adar weights: a shared neighbour with few links says more than a hub.
    weight = np.array([1.0 / np.log(2.0 + len(s)) for s in undirected])
    topic_ids = {t: x for x, t in enumerate(sorted({t for t in topics if t}))}
    topic_of = np.array([topic_ids.get(t, -1) if t else -1 for t in topics])
    for start in range(0, n, _ROWS):
        rows = range(start, min(n, start + _ROWS))
        scores = unit[start : rows.stop] @ unit.T
        if evidence:
            for r, i in enumerate(rows):
                for j in undirected[i]:
                    if i in links[j]:
                        scores[r, j] += BACKLINK_WEIGHT
                    for m in undirected[j]:  # i - j - m: j is shared by i and m
                        scores[r, m] += SHARED_WEIGHT * weight[j]
                if topic_of[i] >= 0:
                    scores[r] += TOPIC_WEIGHT * (topic_of == topic_of[i])
        for r, i in enumerate(rows):
            row = scores[r]
            row[i] = -np.inf
            for j in links[i]:
                row[j] = -np.inf
            best = np.argsort(-row, kind="stable")[:k]
            out.append([(int(j), float(row[j])) for j in best if row[j] >= min_score])
    return out
