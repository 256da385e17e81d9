"""One DuckDB connection per store file per process, shared by threads, released between runs.

Why. Opening a DuckDB file and closing it (which checkpoints) costs 20-120 ms
here; the store used to pay it for every write, ~12 times per librarian run
(bench/RESULTS.md figure 2). DuckDB allows one process per file, so a process
must still let go of the file for others. The policy:

* Every store operation takes a *reference* on the process's connection for the
  file, opening it when nobody holds one, and works on its own cursor (a
  DuckDB cursor is a connection to the same database instance: its own
  transaction, threads never share one). The last reference closes it.
* A *session* (``Store.session()``: a run from ``prepare_run`` to its end) is a
  reference held across many operations: a run's dozen writes cost one open and
  one close instead of twelve. Every write still commits on its own, so an
  attempt is durable the moment it is written.
* Fairness between processes: a session that finds the connection open for
  longer than ``HOLD_S`` does not join it; it *drains* it (new sessions wait,
  running ones finish, the last closes it) and then waits ``COURTESY_S`` before
  reopening, so a process queued on the file gets it. Plain operations never
  wait for a drain (a run in progress must be able to finish, or the drain
  would wait for itself); a session never waits for a drain longer than the
  lock timeout (a leaked session degrades fairness, never deadlocks).
* Processes queue on an advisory ``flock`` of ``<store>.lock`` before opening
  the DuckDB file: polling the flock is a cheap syscall, so a waiter notices the
  courtesy gap within a few milliseconds, where polling DuckDB's own lock with
  backoff would miss it. DuckDB's lock stays authoritative: a process that does
  not take the flock (the ``duckdb`` CLI) still makes us wait and retry.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolwire.errors import StoreLocked

if TYPE_CHECKING:
    import duckdb

try:  # POSIX only; elsewhere the DuckDB lock alone decides (with backoff)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["COURTESY_S", "HOLD_S", "SharedConnection"]

# A process keeps the file at most this long while other sessions start (then drains).
HOLD_S = 0.5
# After a drain, this long with the file free before the same process reopens it.
COURTESY_S = 0.03
# Flock polling interval (jittered): short, so a waiter sees the courtesy gap.
_POLL_S = 0.004


def _locked_error(path: Path, waited: float) -> StoreLocked:
    return StoreLocked(
        f"store file {path} is locked by another process (waited {waited:.1f}s); "
        "retry later or use --db to write a separate shard"
    )


class SharedConnection:
    """The process's connection to one store file: reference counted, drained for fairness."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cond = threading.Condition()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._refs = 0
        self._opened_at = 0.0
        self._draining = False
        self._reopen_after = 0.0
        self._flock_fd: int | None = None
        self.opens = 0  # how many times this process opened the file (for benchmarks)
        # Facts learnt while the connection is open (schema migrated, spec hash stored).
        # Cleared on every open: while we hold the file nobody else can change it.
        self.memo: set[tuple[str, str]] = set()

    # -- references --------------------------------------------------------------------

    def acquire(
        self,
        open_duckdb: Callable[[float], duckdb.DuckDBPyConnection],
        timeout_s: float,
        *,
        session: bool,
    ) -> duckdb.DuckDBPyConnection:
        """Take a reference and return a new cursor; ``release`` it when done."""
        start = time.monotonic()
        deadline = start + timeout_s
        with self._cond:
            if session:
                if self._con is not None and time.monotonic() - self._opened_at > HOLD_S:
                    self._draining = True
                while self._draining and time.monotonic() < deadline:
                    self._cond.wait(deadline - time.monotonic())
            if self._con is None:
                # After a drain, leave the file free a moment for another process.
                while (gap := self._reopen_after - time.monotonic()) > 0 and session:
                    self._cond.wait(gap)
                if self._con is None:
                    self._open(open_duckdb, start, deadline)
            assert self._con is not None
            self._refs += 1
            try:
                return self._con.cursor()
            except BaseException:
                self._release_locked()
                raise

    def release(self, cursor: Any = None) -> None:
        """Drop a reference (closing ``cursor``); the last one closes the connection."""
        with self._cond:
            if cursor is not None:
                try:
                    cursor.close()
                except Exception:  # noqa: BLE001 - a cursor of a dead connection
                    pass
            self._release_locked()

    def _release_locked(self) -> None:
        self._refs -= 1
        if self._refs > 0:
            return
        self._refs = 0
        con, self._con = self._con, None
        try:
            if con is not None:
                con.close()  # checkpoints; other threads wait on the condition meanwhile
        finally:
            self._unlock_file()
            if self._draining:
                self._draining = False
                self._reopen_after = time.monotonic() + COURTESY_S
            self._cond.notify_all()

    # -- opening -----------------------------------------------------------------------

    def _open(
        self,
        open_duckdb: Callable[[float], duckdb.DuckDBPyConnection],
        start: float,
        deadline: float,
    ) -> None:
        self._lock_file(start, deadline)
        try:
            self._con = open_duckdb(max(0.0, deadline - time.monotonic()))
        except BaseException:
            self._unlock_file()
            raise
        self._opened_at = time.monotonic()
        self.opens += 1
        self.memo = set()

    def _lock_file(self, start: float, deadline: float) -> None:
        if fcntl is None:
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    now = time.monotonic()
                    if now >= deadline:
                        raise _locked_error(self.path, now - start) from None
                    # Sleeping with the condition held is right: no connection is open,
                    # so no thread has a reference to release, and others must wait anyway.
                    time.sleep(min(_POLL_S * (0.5 + random.random()), deadline - now))
        except BaseException:
            os.close(fd)
            raise
        self._flock_fd = fd

    def _unlock_file(self) -> None:
        fd, self._flock_fd = self._flock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock
