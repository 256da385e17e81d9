"""Unit-length float32 rows: what every engine returns."""

from __future__ import annotations

import numpy as np

__all__ = ["unit_rows"]


def unit_rows(vectors: np.ndarray, n: int) -> np.ndarray:
    """``vectors`` as ``n`` rows of length 1 (a zero row stays zero)."""
    out = np.asarray(vectors, dtype=np.float32).reshape(n, -1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)
