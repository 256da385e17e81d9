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
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from toolwire.errors import StoreError, StoreLocked
from toolwire.store.shards import open_dataset
from toolwire.store.values import one_line as _one_line

__all__ = [
    "SANDBOX_SETTINGS",
    "SQL_NOT_ALLOWED",
    "lock_down",
    "query_dataset_readonly",
    "query_store_readonly",
    "run_user_sql",
]

SQL_NOT_ALLOWED = "SQL_NOT_ALLOWED"

# Applied in this order; lock_configuration must come last.
SANDBOX_SETTINGS: tuple[tuple[str, object], ...] = (
    ("autoinstall_known_extensions", False),
    ("autoload_known_extensions", False),
    ("allow_community_extensions", False),
    ("enable_external_access", False),
    ("lock_configuration", True),
)
_LOCK_MARKERS = ("could not set lock", "conflicting lock")


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Throw the sandbox switches on an open connection (they cannot be turned back)."""
    for name, value in SANDBOX_SETTINGS:
        con.execute(f"SET {name} = {'true' if value else 'false'}")


def run_user_sql(
    con: duckdb.DuckDBPyConnection, sql: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` on a locked-down connection; (columns, rows) of its last statement."""
    try:
        cursor = con.execute(sql)
        if cursor.description is None:
            return [], []
        return [d[0] for d in cursor.description], cursor.fetchall()
    except duckdb.PermissionException as exc:
        raise StoreError(
            f"SQL reads the store only, no other file: {_one_line(exc)}", code=SQL_NOT_ALLOWED
        ) from None
    except duckdb.Error as exc:
        text = _one_line(exc)
        if "read-only mode" in text or "configuration has been locked" in text:
            raise StoreError(f"SQL is read-only here: {text}", code=SQL_NOT_ALLOWED) from None
        raise StoreError(f"SQL error: {text}") from None


def _connect_readonly(path: Path, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """The store opened read-only, waiting (with backoff) while a writer holds it."""
    start = time.monotonic()
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.Error as exc:
            if not any(marker in str(exc).lower() for marker in _LOCK_MARKERS):
                raise StoreError(f"cannot open store file {path} read-only: {exc}") from None
            waited = time.monotonic() - start
            if waited >= timeout_s:
                raise StoreLocked(
                    f"store file {path} is locked by another process (waited {waited:.1f}s); "
                    "retry later"
                ) from None
            time.sleep(min(delay, timeout_s - waited))
            delay = min(delay * 2, 1.0)


def query_store_readonly(
    path: str | os.PathLike[str], sql: str, *, lock_timeout_s: float = 30.0
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run user SQL on the store file ``path`` in the sandbox (see the module docstring).

    The file must exist (a read never creates a store); it is opened read-only,
    so it is never migrated either: an older store shows the tables it has.
    """
    store = Path(path).expanduser().resolve()
    if not store.is_file():
        raise StoreError(f"no store file at {store} (pass --db PATH or set TOOLWIRE_DB)")
    con = _connect_readonly(store, lock_timeout_s)
    try:
        lock_down(con)
        return run_user_sql(con, sql)
    finally:
        con.close()


def query_dataset_readonly(
    paths: Sequence[str | Path], sql: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run user SQL over store shards and Parquet files (``--dataset``) in the sandbox."""
    con = open_dataset(paths, parquet_in_memory=True)
    try:
        lock_down(con)
        return run_user_sql(con, sql)
    finally:
        con.close()
