"""What an embedder is, below the two that use one: the topic scorer
(``librarian.judge``) reads its vectors and the store's cache
(``store.evidence.CachingEmbedder``) wraps one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["Embedder"]


class Embedder(Protocol):
    """Unit-length vectors for notes (documents) and topics (queries)."""

    name: str

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray: ...
