"""``toolwire sql``: user SQL on a snapshot of the store, in a child process with a deadline.

Issue 45 item 18. DuckDB checks its interrupt between vectors, not inside a scalar
function: ``SELECT list_sort(range(200000000))[1]`` ran 243 s under a 2 s bound, and
a read-only connection holds the store file the whole time, so a scheduled run on
it failed ``STORE_LOCKED``. Now:

* the store is opened read-only (sandboxed) only to copy it, with its WAL, into a
  private temporary folder: a run waits for that copy, never for the query;
* the query runs on the copy in a child process (``python -m toolwire.store.user_sql``),
  sandboxed and time-bound as before; the child is killed once the bound has passed
  (plus a short grace for DuckDB's own interrupt), which no query can outlive.

The child reports back one pickle on stdout (our own process, never user data
unpickled from elsewhere). ``--dataset`` runs in the child the same way.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolwire.errors import StoreError, ToolwireError
from toolwire.store.sandbox import (
    DEFAULT_LIMITS,
    SQL_TIMEOUT,
    SandboxLimits,
    connect_sandboxed,
    query_dataset_readonly,
    query_store_readonly,
)

__all__ = ["query_dataset_in_child", "query_store_snapshot"]

STARTUP_S = 120.0  # the child's imports on a busy machine, before the query's clock starts
GRACE_S = 2.0  # DuckDB's own interrupt ends most queries: it gets this long to
_READY = b"\x01"

Rows = tuple[list[str], list[tuple[Any, ...]]]


def query_store_snapshot(
    path: str | os.PathLike[str],
    sql: str,
    *,
    lock_timeout_s: float = 30.0,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> Rows:
    """(columns, rows) of ``sql`` on a copy of the store ``path`` taken now."""
    store = Path(path).expanduser().resolve()
    if not store.is_file():
        raise StoreError(f"no store file at {store} (pass --db PATH or set TOOLWIRE_DB)")
    with tempfile.TemporaryDirectory(prefix="toolwire-sql-") as folder:
        copy = Path(folder) / store.name
        con = connect_sandboxed(store, read_only=True, lock_timeout_s=lock_timeout_s)
        try:  # the read-only open holds writers off while the bytes are copied
            shutil.copyfile(store, copy)
            wal = store.with_name(store.name + ".wal")
            if wal.is_file():
                shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        except OSError as exc:
            raise StoreError(f"cannot copy {store.name} to query it: {exc.strerror}") from None
        finally:
            con.close()
        return _in_child(("store", str(copy), sql, limits), limits.timeout_s)


def query_dataset_in_child(
    paths: Sequence[str | Path], sql: str, *, limits: SandboxLimits = DEFAULT_LIMITS
) -> Rows:
    """(columns, rows) of ``sql`` over shards and Parquet files, in a child."""
    return _in_child(("dataset", [str(p) for p in paths], sql, limits), limits.timeout_s)


def _timeout(timeout_s: float) -> StoreError:
    return StoreError(
        f"the query stopped after {timeout_s:g} s (the time bound of reads of a store); "
        "narrow the query",
        code=SQL_TIMEOUT,
    )


def _in_child(job: tuple[Any, ...], timeout_s: float) -> Rows:
    child = subprocess.Popen(
        [sys.executable, "-m", "toolwire.store.user_sql"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(pickle.dumps(job))
        child.stdin.close()
        child.stdin = None  # sent: communicate() must not flush it again
        ready, _, _ = select.select([child.stdout], [], [], STARTUP_S)
        if not ready or os.read(child.stdout.fileno(), 1) != _READY:
            raise StoreError(f"the query process did not start: {_stderr(child)}")
        deadline = time.monotonic() + timeout_s + GRACE_S
        try:
            out, err = child.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise _timeout(timeout_s) from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    try:
        kind, *payload = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, ValueError):
        raise StoreError(
            f"the query process failed: {err.decode(errors='replace')[-300:]}"
        ) from None
    if kind == "error":
        code, message = payload
        raise StoreError(message, code=code)
    columns, rows = payload
    return columns, rows


def _stderr(child: subprocess.Popen[bytes]) -> str:
    child.kill()
    _, err = child.communicate()
    return err.decode(errors="replace").strip()[-300:] or f"exit status {child.returncode}"


def _main() -> None:
    job = pickle.loads(sys.stdin.buffer.read())
    kind, target, sql, limits = job
    # The result goes out on the original stdout; fd 1 becomes stderr, where DuckDB's
    # progress bar (it prints to stdout) cannot corrupt it.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    out.write(_READY)
    out.flush()
    try:
        if kind == "store":
            result: tuple[Any, ...] = ("ok", *query_store_readonly(target, sql, limits=limits))
        else:
            result = ("ok", *query_dataset_readonly(target, sql, limits=limits))
    except ToolwireError as exc:
        result = ("error", exc.code, exc.message)
    out.write(pickle.dumps(result))
    out.flush()


if __name__ == "__main__":
    _main()
