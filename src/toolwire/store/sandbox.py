"""The SQL sandbox of ``toolwire sql``: user SQL that can read the store and nothing else.

Why DuckDB's own switches rather than a list of statement types: a list
misses what it does not name (``IMPORT DATABASE 'dir'`` parses as a PRAGMA and
ran the SQL files of that folder; ``read_text('/etc/passwd')`` is a SELECT;
``ATTACH`` of the real store then ``DELETE`` went through ``--dataset``;
issue #16 items 1 and 9). So every connection that runs user SQL is:

* the store file opened ``read_only=True`` (``--db``): no statement can change
  it, whatever its type;
* ``enable_external_access=false``: no file is read or written but the ones
  already open: no ``ATTACH``, ``COPY``, ``EXPORT``/``IMPORT DATABASE``,
  ``read_csv``/``read_text``/``read_parquet``/``glob``, ``INSTALL``/``LOAD``;
* extension auto-install/auto-load and community extensions off;
* ``lock_configuration=true`` last: no ``SET`` can turn any of it back on.

What is left: ``SELECT``/``WITH``/``EXPLAIN``/``DESCRIBE``/``SHOW``/``PRAGMA``
over the store's tables and views, and temporary tables and macros that live
in memory and end with the command. ``--dataset`` builds its in-memory views
first (store shards attached ``READ_ONLY``; Parquet files *copied into
memory*, because DuckDB's ``allowed_paths`` would let ``COPY ... TO`` overwrite
them), then throws the same switches before the user's SQL runs.

Refusals are ``StoreError`` with code ``SQL_NOT_ALLOWED``; other SQL errors
``STORE_ERROR`` ("SQL error: ..."), one line each.

Bounds (issue #30 item 12): every sandboxed connection also gets a
``memory_limit`` and a ``max_temp_directory_size`` (DuckDB's defaults are 80 %
of RAM and 90 % of the free disk beside the store), set before
``lock_configuration``, and every statement runs under :func:`time_bound`: a
timer thread calls ``interrupt()`` when the time is up, so a long query lets go
of the store with ``SQL_TIMEOUT`` instead of holding it (a run waiting on the
file would fail ``STORE_LOCKED``).

One factory for every read of a store's SQL objects (issue #30 item 8). A store
file from elsewhere may define ``run_summary`` (or a macro) as a call to
``read_text('/home/...')``; ``runs``, ``show``, ``report --html``, ``export``
and ``check-store`` read those views, so they open the store through
:func:`connect_sandboxed` too (:class:`SandboxedStore`: the :class:`Store`
read API over sandboxed connections), not only ``toolwire sql``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from toolwire.errors import StoreError, StoreLocked
from toolwire.store.connection import SharedConnection
from toolwire.store.shards import open_dataset
from toolwire.store.store import Store
from toolwire.store.store_file import FileLocks
from toolwire.store.values import one_line as _one_line

__all__ = [
    "DEFAULT_LIMITS",
    "SANDBOX_SETTINGS",
    "SQL_NOT_ALLOWED",
    "SQL_TIMEOUT",
    "SandboxLimits",
    "SandboxedStore",
    "connect_sandboxed",
    "lock_down",
    "query_dataset_readonly",
    "query_store_readonly",
    "run_user_sql",
    "time_bound",
]

SQL_NOT_ALLOWED = "SQL_NOT_ALLOWED"
SQL_TIMEOUT = "SQL_TIMEOUT"

# Applied in this order; lock_configuration must come last.
SANDBOX_SETTINGS: tuple[tuple[str, str | bool], ...] = (
    ("autoinstall_known_extensions", False),
    ("autoload_known_extensions", False),
    ("allow_community_extensions", False),
    ("enable_external_access", False),
    ("lock_configuration", True),
)
_LOCK_MARKERS = ("could not set lock", "conflicting lock")


@dataclass(frozen=True)
class SandboxLimits:
    """Time and space one sandboxed connection may take (DuckDB size strings)."""

    timeout_s: float = 120.0
    memory_limit: str = "1GB"
    max_temp_directory_size: str = "1GB"

    def settings(self) -> tuple[tuple[str, str | bool], ...]:
        """Every switch of the sandbox, the limits before ``lock_configuration``."""
        limits: tuple[tuple[str, str | bool], ...] = (
            ("memory_limit", self.memory_limit),
            ("max_temp_directory_size", self.max_temp_directory_size),
        )
        return limits + SANDBOX_SETTINGS


DEFAULT_LIMITS = SandboxLimits()


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "'" + str(value).replace("'", "''") + "'"


def lock_down(con: duckdb.DuckDBPyConnection, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
    """Throw the sandbox switches on an open connection (they cannot be turned back)."""
    for name, value in limits.settings():
        con.execute(f"SET {name} = {_literal(value)}")


@contextmanager
def time_bound(con: duckdb.DuckDBPyConnection, timeout_s: float, what: str) -> Iterator[None]:
    """Interrupt whatever ``con`` runs once ``timeout_s`` has passed: SQL_TIMEOUT, one line.

    A timer thread calls ``con.interrupt()`` (DuckDB checks for it between
    vectors, so even a cross join stops within milliseconds); any error that
    follows the interrupt is reported as the timeout it is.
    """
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    except (duckdb.Error, StoreError) as exc:
        if fired.is_set():
            raise StoreError(
                f"{what} stopped after {timeout_s:g} s (the time bound of reads of a store); "
                "narrow the query",
                code=SQL_TIMEOUT,
            ) from None
        raise exc
    finally:
        timer.cancel()


def run_user_sql(
    con: duckdb.DuckDBPyConnection, sql: str, *, timeout_s: float = DEFAULT_LIMITS.timeout_s
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` on a locked-down connection; (columns, rows) of its last statement."""
    try:
        with time_bound(con, timeout_s, "the query"):
            cursor = con.execute(sql)
            if cursor.description is None:
                return [], []
            return [d[0] for d in cursor.description], cursor.fetchall()
    except duckdb.PermissionException as exc:
        raise StoreError(
            f"SQL reads the store only, no other file: {_one_line(exc)}", code=SQL_NOT_ALLOWED
        ) from None
    except duckdb.OutOfMemoryException as exc:
        raise StoreError(
            f"SQL needs more than the sandbox's memory and spill limits: {_one_line(exc)}",
            code=SQL_NOT_ALLOWED,
        ) from None
    except duckdb.Error as exc:
        text = _one_line(exc)
        if "read-only mode" in text or "configuration has been locked" in text:
            raise StoreError(f"SQL is read-only here: {text}", code=SQL_NOT_ALLOWED) from None
        raise StoreError(f"SQL error: {text}") from None


def connect_sandboxed(
    path: str | os.PathLike[str],
    *,
    read_only: bool,
    lock_timeout_s: float = 30.0,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> duckdb.DuckDBPyConnection:
    """The one way toolwire opens a store whose SQL objects it reads: sandboxed from the start.

    The switches go in DuckDB's ``config`` at connect time, so not even the
    first statement (a migration check, ``SELECT * FROM run_summary``) runs
    outside the sandbox. Waits with backoff while another process holds the file.
    """
    config: dict[str, str | bool | int | float | list[str]] = dict(limits.settings())
    start = time.monotonic()
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.Error as exc:
            if not any(marker in str(exc).lower() for marker in _LOCK_MARKERS):
                raise StoreError(f"cannot open store file {path}: {_one_line(exc)}") from None
            waited = time.monotonic() - start
            if waited >= lock_timeout_s:
                raise StoreLocked(
                    f"store file {path} is locked by another process (waited {waited:.1f}s); "
                    "retry later"
                ) from None
            time.sleep(min(delay, lock_timeout_s - waited))
            delay = min(delay * 2, 1.0)


class SandboxedStore(Store):
    """A :class:`Store` whose every connection is sandboxed and every use time-bound.

    For the commands that read a store's views: ``runs``, ``show``, ``report
    --html``, ``export``, ``check-store``. Writes the store makes for itself
    (migrations, ``check-store --record``) still work: the sandbox stops other
    files, not the store's own.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        lock_timeout_s: float = 30.0,
        limits: SandboxLimits = DEFAULT_LIMITS,
    ) -> None:
        super().__init__(path, lock_timeout_s=lock_timeout_s, create=False)
        self.limits = limits
        # Its own connection, never a cursor of an unsandboxed one this process holds.
        self._locks = FileLocks(SharedConnection(self.path))

    def _open(self, timeout_s: float) -> duckdb.DuckDBPyConnection:
        return connect_sandboxed(
            self.path, read_only=False, lock_timeout_s=timeout_s, limits=self.limits
        )

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        with (
            super()._connect(write=write) as con,
            time_bound(con, self.limits.timeout_s, f"reading {self.path.name}"),
        ):
            yield con


def query_store_readonly(
    path: str | os.PathLike[str],
    sql: str,
    *,
    lock_timeout_s: float = 30.0,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run user SQL on the store file ``path`` in the sandbox (see the module docstring).

    The file must exist (a read never creates a store); it is opened read-only,
    so it is never migrated either: an older store shows the tables it has.
    """
    store = Path(path).expanduser().resolve()
    if not store.is_file():
        raise StoreError(f"no store file at {store} (pass --db PATH or set TOOLWIRE_DB)")
    con = connect_sandboxed(store, read_only=True, lock_timeout_s=lock_timeout_s, limits=limits)
    try:
        return run_user_sql(con, sql, timeout_s=limits.timeout_s)
    finally:
        con.close()


def query_dataset_readonly(
    paths: Sequence[str | Path], sql: str, *, limits: SandboxLimits = DEFAULT_LIMITS
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run user SQL over store shards and Parquet files (``--dataset``) in the sandbox."""
    con = open_dataset(paths, parquet_in_memory=True)
    try:
        lock_down(con, limits)
        return run_user_sql(con, sql, timeout_s=limits.timeout_s)
    finally:
        con.close()
