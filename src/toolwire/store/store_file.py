"""A DuckDB store file opened lock-aware: the process's shared connection, run sessions,
one transaction per write, pending migrations applied first, toolwire's read-only
queries. ``store.Store`` builds toolwire's rows on it (the design: ``store.store``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import duckdb

from toolwire.errors import RunNotFound, StoreError, StoreLocked
from toolwire.store.connection import SharedConnection
from toolwire.store.schema import SCHEMA_VERSION_DDL, pending_migrations
from toolwire.store.values import one_line as _one_line
from toolwire.store.values import utcnow as _utcnow

if TYPE_CHECKING:
    import pyarrow as pa  # store.rows builds the Arrow tables, importing it on first write

__all__ = ["FileLocks", "StoreFile"]

_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0
_LOCK_MARKERS = ("could not set lock", "conflicting lock")
# Statement types ``query`` accepts (toolwire's own reads; user SQL goes through
# ``store.sandbox``). It also rolls back whatever they did, as a backstop.
_READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


@dataclass
class FileLocks:
    """The process's connection to one file and its write lock (one per file)."""

    shared: SharedConnection
    write: threading.RLock = field(default_factory=threading.RLock)


_LOCKS: dict[Path, FileLocks] = {}
_LOCKS_GUARD = threading.Lock()


def _locks_for(path: Path) -> FileLocks:
    with _LOCKS_GUARD:
        if path not in _LOCKS:
            _LOCKS[path] = FileLocks(SharedConnection(path))
        return _LOCKS[path]


class StoreFile:
    """One DuckDB file opened politely: shared connection, sessions, one transaction per
    write, migrations first; ``Store`` adds toolwire's rows on top."""

    def __init__(
        self, path: str | Path, *, lock_timeout_s: float = 30.0, create: bool = True
    ) -> None:
        """``create=False`` is for read paths (``runs``, ``show``, ``undo``...): a file
        that does not exist is a StoreError, and nothing is created at a mistyped
        ``--db`` (issue #16 item 23). Only a run creates a store."""
        # Resolve: DuckDB's in-process instance cache is keyed by the path string,
        # and two spellings of one file must not open two instances of it.
        self.path: Path = Path(path).expanduser().resolve()
        self.lock_timeout_s = float(lock_timeout_s)
        if not create and not self.path.is_file():
            raise StoreError(
                f"no store file at {self.path} (pass --db PATH or set TOOLWIRE_DB); "
                "a command that only reads never creates one"
            )
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._locks = _locks_for(self.path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- connections -------------------------------------------------------------------

    def _open(self, timeout_s: float) -> duckdb.DuckDBPyConnection:
        start = time.monotonic()
        delay = _FIRST_BACKOFF_S
        while True:
            try:
                return duckdb.connect(str(self.path))
            except duckdb.Error as exc:
                if not any(marker in str(exc).lower() for marker in _LOCK_MARKERS):
                    raise StoreError(f"cannot open store file {self.path}: {exc}") from exc
                waited = time.monotonic() - start
                remaining = timeout_s - waited
                if remaining <= 0:
                    raise StoreLocked(
                        f"store file {self.path} is locked by another process "
                        f"(waited {waited:.1f}s); retry later or use --db to write a "
                        "separate shard"
                    ) from exc
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, _MAX_BACKOFF_S)

    @contextmanager
    def session(self) -> Iterator[Self]:
        """Hold the file for a run: the operations inside share one open connection.

        Each write inside still commits on its own (durable at once); the file is
        released when the session ends, or drained and handed over when this
        process has held it long and another run starts (``store.connection``).
        """
        cursor = self._locks.shared.acquire(self._open, self.lock_timeout_s, session=True)
        try:
            yield self
        finally:
            self._locks.shared.release(cursor)

    def begin_session(self) -> Any:
        """``session()`` for callers whose run spans functions; pass the token to
        ``end_session`` exactly once."""
        return self._locks.shared.acquire(self._open, self.lock_timeout_s, session=True)

    def end_session(self, token: Any) -> None:
        self._locks.shared.release(token)

    @property
    def opens(self) -> int:
        """How many times this process has opened the file (a benchmark figure)."""
        return self._locks.shared.opens

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on the process's connection for one operation; migrations run first."""
        # Take the cursor *before* waiting for the write lock: threads queued on the
        # lock keep the connection open, so a burst of writes does not reopen (and
        # checkpoint) the file once per write. Nothing stays open once the burst ends.
        con = self._locks.shared.acquire(self._open, self.lock_timeout_s, session=False)
        try:
            memo = self._locks.shared.memo
            # Migrations are checked once per open of the file, not once per Store object.
            ready = ("schema", "current") in memo
            guard: AbstractContextManager[Any] = (
                self._locks.write if write or not ready else nullcontext()
            )
            with guard:
                if ("schema", "current") not in memo:
                    self._migrate(con)
                    memo.add(("schema", "current"))
                yield con
        finally:
            self._locks.shared.release(con)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """One write transaction; DuckDB errors become StoreError naming the operation."""
        with self._connect(write=True) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # a failed COMMIT already ended the transaction
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
                raise

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(SCHEMA_VERSION_DDL)
            row = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
            for version, sql in pending_migrations(current):
                con.execute(sql)
                con.execute("INSERT INTO schema_version VALUES (?, ?)", [version, _utcnow()])
            con.execute("COMMIT")
        except BaseException as exc:
            con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"cannot migrate store file {self.path}: {exc}") from exc
            raise

    @staticmethod
    def _insert_arrow(
        con: duckdb.DuckDBPyConnection, table_name: str, rows: pa.Table, *, ignore: bool = False
    ) -> None:
        if rows.num_rows == 0:
            return
        view = f"_{table_name}_rows"
        cols = ", ".join(rows.column_names)
        verb = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
        con.register(view, rows)
        con.execute(f"{verb} {table_name} ({cols}) SELECT {cols} FROM {view}")
        # Not in a `finally`: after a failed INSERT the transaction is aborted, unregister
        # would raise and hide the real error; the connection closes right after anyway.
        con.unregister(view)

    @staticmethod
    def _require_run(con: duckdb.DuckDBPyConnection, run_id: str) -> str:
        row = con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in the store")
        return str(row[0])

    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """Run toolwire's own read-only SQL; (column names, rows) of its last statement.

        Only SELECT and EXPLAIN; SQL a user types runs in ``store.sandbox`` instead.
        """
        with self._connect(write=False) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                for statement in con.extract_statements(sql):
                    kind = statement.type.name
                    if kind not in _READ_STATEMENTS:
                        raise StoreError(
                            f"SQL is read-only here: {kind} statements are not allowed"
                        )
                cursor = con.execute(sql, params or [])
                if cursor.description is None:
                    return [], []
                columns = [d[0] for d in cursor.description]
                return columns, cursor.fetchall()
            except duckdb.Error as exc:
                raise StoreError(f"SQL error: {_one_line(exc)}") from exc
            finally:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # the statement itself ended the transaction (e.g. COMMIT)

    def schema_version(self) -> int:
        """The highest migration applied to this file."""
        _, rows = self.query("SELECT max(version) FROM schema_version")
        return int(rows[0][0])
