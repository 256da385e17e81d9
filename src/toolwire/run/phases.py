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

from toolwire.store.evidence import CachingEmbedder

if TYPE_CHECKING:
    from toolwire.embedder import Embedder

__all__ = ["EMBED_CHUNK", "announcing", "embed_note_texts", "listen", "report"]

Listener = Callable[[str, int, int], None]
EMBED_CHUNK = 16  # texts per embedder call while someone watches: a step every ~0.5-2 s

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


def embed_note_texts(embedder: Embedder, notes: Sequence[Sequence[str]]) -> np.ndarray:
    """The vectors of every text of every note (a note is its chunks), in order, as one
    ``embed_notes`` call of them all would give; while someone listens, in chunks, with
    ``embedding notes k/N`` counting notes. Notes whose every text the store's cache
    holds are counted at once (an edit run embeds a few notes, it does not race 0 to N)."""
    flat = [text for texts in notes for text in texts]
    if _listener is None or not flat:
        return embedder.embed_notes(flat)
    total = len(notes)
    starts = np.cumsum([0] + [len(texts) for texts in notes])
    cached = embedder.cached_notes(flat) if isinstance(embedder, CachingEmbedder) else []
    hit = [bool(cached) and all(cached[starts[i] : starts[i + 1]]) for i in range(total)]
    rows: list[np.ndarray | None] = [None] * len(flat)

    def embed(group: list[int]) -> None:
        texts = [text for i in group for text in notes[i]]
        if not texts:
            return
        vectors = embedder.embed_notes(texts)
        at = 0
        for i in group:
            for j in range(starts[i], starts[i + 1]):
                rows[j], at = vectors[at], at + 1

    report("embedding notes", 0, total)  # the phase has begun (the first chunk loads)
    done = [i for i in range(total) if hit[i]]
    if done:
        embed(done)
        report("embedding notes", len(done), total)
    group: list[int] = []
    for i in (i for i in range(total) if not hit[i]):
        group.append(i)
        if sum(len(notes[g]) for g in group) >= EMBED_CHUNK:
            embed(group)
            done += group
            group = []
            report("embedding notes", len(done), total)
    if group:
        embed(group)
        report("embedding notes", total, total)
    return np.stack([row for row in rows if row is not None])
