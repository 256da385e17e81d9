"""Progress of the slow phases inside a run, for whoever shows it (the CLI's bar or lines).

Model turns report through the job's ``on_turn``; a phase with no turns can
take longer than all of them: embedding every note for the scorer took 33-138 s
with nothing on the screen after ``started`` (issue 33). Such a phase calls
:func:`report` as it goes; :func:`listen` (the CLI, around one run) receives
``(phase, done, total)``. With no listener nothing changes, not even batching.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from toolwire.embedder import Embedder

__all__ = ["EMBED_CHUNK", "announcing", "listen", "report", "with_progress"]

Listener = Callable[[str, int, int], None]
EMBED_CHUNK = 16  # notes per embedder call while someone watches: a step every ~0.5-2 s

_listener: Listener | None = None


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Send every phase's progress to ``listener`` inside the block (one run at a time)."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous


def report(phase: str, done: int, total: int) -> None:
    """``done`` of ``total`` items of ``phase`` finished (no-op without a listener)."""
    if _listener is not None:
        _listener(phase, done, total)


def announcing(step: Callable[..., Any]) -> Callable[..., Any]:
    """A job's step runner that says when each step other than a turn begins
    (``report(name, 0, 0)``: begun, size unknown), so a slow one is never silent:
    reading thousands of notes, applying a big plan, writing the report."""

    def run(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        if _listener is not None and not name.startswith(_TURN_STEPS):
            report(name, 0, 0)
        return step(name, fn, *args)

    return run


_TURN_STEPS = ("turn-", "validate-")  # the turns report through on_turn already


class _ProgressEmbedder:
    """An embedder that embeds notes in chunks and reports after each one."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # name, and whatever else callers read
        return getattr(self.inner, name)

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        total = len(texts)
        report("embedding notes", 0, total)  # the phase has begun (the first chunk loads)
        if total <= EMBED_CHUNK:
            out = self.inner.embed_notes(texts)
            report("embedding notes", total, total)
            return out
        parts = []
        for start in range(0, total, EMBED_CHUNK):
            parts.append(self.inner.embed_notes(texts[start : start + EMBED_CHUNK]))
            report("embedding notes", min(start + EMBED_CHUNK, total), total)
        return np.concatenate(parts, axis=0)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_topics(texts)


def with_progress(embedder: Embedder | None) -> Embedder | None:
    """``embedder`` reporting its progress, when someone listens (else itself)."""
    if embedder is None or _listener is None:
        return embedder
    return _ProgressEmbedder(embedder)
