"""The scorer's second view of the notes: their words, as TF-IDF rows (scipy.sparse).

The embedding (e5-small) reads a note as a whole and blurs what a topic in a personal
vault is often about: the names of its tools and commands (``psql``, ``defmodule``,
``useEffect``, a fenced ````ruby`` block). The words view keeps them. It is not compared
with the topics' one-line descriptions (a dozen words cannot stand for a topic's
vocabulary) but with the notes the run has learned from, as a second centroid view
beside the embedding's (``fit``): the user's tagged notes and this run's
confident decisions. Measured on the development corpus (``bench/vault_accuracy.py``,
til-dev, nothing tagged): the top choice right 85 % against 81 % without it.

What counts as a term (chosen by that measurement: word pairs and character n-grams
changed nothing within one note of 214, and cost 3-4x the time):

- every word of the body (``judge_text.words``: never split inside a word);
- the title's words, counted ``TITLE_WEIGHT`` more times, and once more as title terms;
- heading words, and the folders' words (a vault filed in folders says something);
- the language of each fenced code block, ``CODE_LANGUAGE_WEIGHT`` times.

Terms in a single note are dropped (they cannot relate two notes); counts are
sublinear (1 + log), weighted by smoothed IDF, rows unit length.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolwire.librarian.judge.text import headings, words

__all__ = ["note_terms", "tfidf_rows"]

TITLE_WEIGHT = 2
CODE_LANGUAGE_WEIGHT = 3
# A term must occur in at least this many notes to be a column.
MIN_NOTES_PER_TERM = 2

_FENCE_LANGUAGE = re.compile(r"^(?:```|~~~)\s*([\w+#.-]+)", re.M)


def note_terms(title: str, path: str, body: str) -> Counter[str]:
    """The terms of one note and how often each occurs (module docstring)."""
    terms: Counter[str] = Counter(f"w:{w}" for w in words(body))
    for w in words(title):
        terms[f"w:{w}"] += TITLE_WEIGHT
        terms[f"t:{w}"] += 1
    for w in words(" ".join(headings(body))):
        terms[f"w:{w}"] += 1
    for w in words(" ".join(path.split("/")[:-1])):
        terms[f"f:{w}"] += 1
    for lang in _FENCE_LANGUAGE.findall(body):
        terms[f"lang:{lang.lower()}"] += CODE_LANGUAGE_WEIGHT
    return terms


def tfidf_rows(notes: Sequence[Counter[str]]) -> Any:
    """One unit-length TF-IDF row per note (an empty note: a zero row), a
    ``scipy.sparse.csr_matrix``."""
    import scipy.sparse as sp  # ~0.3 s: only when a run is judged, never at start-up

    df: Counter[str] = Counter()
    for terms in notes:
        df.update(terms.keys())
    columns = {t: i for i, t in enumerate(t for t, c in df.items() if c >= MIN_NOTES_PER_TERM)}
    n = len(notes)
    idf = np.zeros(len(columns))
    for term, col in columns.items():
        idf[col] = math.log((1 + n) / (1 + df[term])) + 1.0
    indices: list[int] = []
    values: list[float] = []
    indptr = [0]
    for terms in notes:
        for term, count in terms.items():
            j = columns.get(term)
            if j is not None:
                indices.append(j)
                values.append((1.0 + math.log(count)) * idf[j])
        indptr.append(len(indices))
    m = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int64), indptr),
        shape=(n, len(columns)),
    )
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.where(norms == 0, 1.0, norms)) @ m)
