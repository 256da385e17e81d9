"""Unit-length float32 rows: what every engine returns."""

from __future__ import annotations

import numpy as np

__all__ = ["unit", "unit_rows"]


def unit(m: np.ndarray) -> np.ndarray:
    """``m`` with every vector along its last axis of length 1 (a zero one stays zero)."""
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def unit_rows(vectors: np.ndarray, n: int) -> np.ndarray:
    """``vectors`` as ``n`` float32 rows of length 1."""
    return unit(np.asarray(vectors, dtype=np.float32).reshape(n, -1))
