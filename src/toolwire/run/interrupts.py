"""Ctrl-C and SIGTERM during a run: stop at a safe point, end the run ``Failed``.

:func:`interruptible` (around a whole run, in the main thread) turns SIGTERM
into the same exception as Ctrl-C, :class:`RunInterrupted` (a KeyboardInterrupt,
so nothing in between swallows it as an ordinary error); the run's lifecycle
then ends the run ``Failed`` with ``INTERRUPTED`` (``runstart.settle_interrupted``).

:func:`shielded` (around the apply of a plan to the notes) defers both
signals to the end of the block: the workspace is then either untouched or
fully applied, never half-written, and the journal says which. A second
Ctrl-C inside a shield is deferred too; SIGKILL cannot be, and that case is
the journal's crash recovery (``journal.recover``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["INTERRUPTED", "RunInterrupted", "interruptible", "shielded"]

INTERRUPTED = "INTERRUPTED"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES: dict[int, str] = {int(signal.SIGINT): "Ctrl-C (SIGINT)", int(signal.SIGTERM): "SIGTERM"}


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM; ``signum`` says which."""

    def __init__(self, message: str, signum: int = int(signal.SIGINT)) -> None:
        super().__init__(message)
        self.signum = signum


class _State(threading.local):
    depth = 0  # shields open
    pending: int | None = None  # a signal that came inside a shield


_state = _State()


def _raise_for(signum: int, frame: FrameType | None) -> None:
    if _state.depth:
        _state.pending = signum
        return
    raise RunInterrupted(f"stopped by {_NAMES.get(signum, str(signum))}", signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise RunInterrupted here (only in the main thread: signal
    handlers belong to it; elsewhere this does nothing). The old handlers come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    for signum in _SIGNALS:
        try:
            previous[signum] = signal.signal(signum, _raise_for)
        except (ValueError, OSError):  # an embedded interpreter may not allow it
            continue
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """Defer Ctrl-C and SIGTERM until the block ends; then raise RunInterrupted."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
        pending, _state.pending = _state.pending, None
        if pending is not None and _state.depth == 0:
            raise RunInterrupted(
                f"stopped by {_NAMES.get(pending, str(pending))} (after the notes were written)",
                pending,
            )
        if pending is not None:
            _state.pending = pending  # an outer shield raises it
