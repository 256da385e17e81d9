"""Near-duplicate notes: pairs close in meaning (embeddings) whose words say the same.

Two views must agree. The embeddings find candidates (cosine >= ``MIN_COSINE``: a
paraphrase or a reformatted copy stays close; so does every note on the same subject).
The words decide: a copy shares most of its word pairs with the original
(containment of the smaller note's word bigrams in the other's, which an appended or
truncated copy keeps high), a paraphrase at least most of its vocabulary (Jaccard of
content words); two notes on one subject written apart share neither. Thresholds are
bench/duplicates.py's (injected copies against same-chapter near-misses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DuplicatePair", "find_duplicates", "text_similarity"]

MIN_COSINE = 0.90
MIN_CONTAINMENT = 0.60  # bigrams of the smaller note found in the other
MIN_VOCABULARY = 0.55  # Jaccard of content words (a paraphrase)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    "a an the and or of to in on at for with by is are was be it this that as from".split()
)


@dataclass(frozen=True, slots=True)
class DuplicatePair:
    first: int
    second: int
    cosine: float
    containment: float
    vocabulary: float


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in _STOP]


def text_similarity(a: str, b: str) -> tuple[float, float]:
    """(bigram containment of the smaller text in the larger, content-word Jaccard)."""
    wa, wb = _words(a), _words(b)
    ba, bb = set(zip(wa, wa[1:], strict=False)), set(zip(wb, wb[1:], strict=False))
    small = min(len(ba), len(bb))
    containment = len(ba & bb) / small if small else 0.0
    sa, sb = set(wa), set(wb)
    vocabulary = len(sa & sb) / len(sa | sb) if sa | sb else 0.0
    return containment, vocabulary


def find_duplicates(
    vectors: np.ndarray, texts: Sequence[str], *, min_cosine: float = MIN_COSINE
) -> list[DuplicatePair]:
    """Every pair (i < j) both views call a near-duplicate, closest first."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    pairs = []
    for start in range(0, len(texts), 512):
        block = unit[start : start + 512] @ unit.T
        for r, j in zip(*np.nonzero(block >= min_cosine), strict=True):
            i = start + int(r)
            if i >= j:
                continue
            containment, vocabulary = text_similarity(texts[i], texts[j])
            if containment >= MIN_CONTAINMENT or vocabulary >= MIN_VOCABULARY:
                cos = float(block[r, j])
                pairs.append(DuplicatePair(i, int(j), cos, containment, vocabulary))
    return sorted(pairs, key=lambda p: (-p.cosine, p.first, p.second))
