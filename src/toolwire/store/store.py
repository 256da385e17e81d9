"""The DuckDB store: short connections, lock-aware opening, one transaction per write.

Concurrency design. DuckDB lets one process at a time open a file for writing
(a second gets ``IOException: Could not set lock on file``; a read-only
connection fails the same way while a writer holds it). So:

* A process holds the file only while it uses it (``store.connection``): each
  operation takes a reference on the process's one connection to the file and
  works on its own cursor; the last reference closes it, so another process (a
  parallel run, ``toolwire sql``) can take the file between two of our runs.
  ``Store.session()`` holds a reference across a whole run, so a run's writes
  cost one open and one close (opening and closing, which checkpoints, costs
  20-120 ms here), while every write still commits on its own. The librarian
  lets go of it while it waits for a model (seconds to minutes), so ``toolwire
  sql`` or another run never waits for a whole run, only for a turn's writes.
* Opening waits for the file (an advisory flock that other toolwire processes
  queue on, then DuckDB's own lock, retried with backoff: 50 ms doubling, capped
  at 1 s) until ``lock_timeout_s`` (settings ``TOOLWIRE_DB_LOCK_TIMEOUT_S``), then
  raises ``StoreLocked``. A second process writing the same file therefore waits,
  then fails with a clear message; it never corrupts or loses a committed run.
* Threads in one process share the connection (one cursor each); a per-file
  ``threading.RLock`` serialises writes (no write-write conflicts).
* Reads take the same retry path. ``query`` runs in a transaction that is
  rolled back, so SQL typed by a user cannot change the store.

The first operation of a Store applies pending migrations (``schema.MIGRATIONS``)
in one transaction. Timestamps are stored as naive UTC. Data arrives already
redacted; parameters are never logged. Bulk rows (operations, tool calls, pack
files) go through a pyarrow Table (built in ``schema``) and ``INSERT ... SELECT``:
DuckDB's ``executemany`` manages ~1-2k rows/s, Arrow ~2M rows/s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

import duckdb

from toolwire.domain import Attempt, OperationOutcome
from toolwire.errors import RunNotFound, StoreError, UsageError
from toolwire.store.rows import note_change_rows, operation_rows, pack_file_rows, tool_call_rows
from toolwire.store.schema import (
    OPERATION_STATUSES,
    RUN_COLUMNS,
    RUN_STATUSES,
)
from toolwire.store.store_file import StoreFile
from toolwire.store.values import one_line as _one_line
from toolwire.store.values import storable_text
from toolwire.store.values import to_timestamp as _to_timestamp
from toolwire.store.values import utcnow as _utcnow

if TYPE_CHECKING:
    import pyarrow as pa  # store.rows builds the Arrow tables, importing it on first write

__all__ = ["PRUNED", "Store"]

# What a pruned attempt's raw_text reads (the column is NOT NULL): see prune_raw_texts.
PRUNED = "[pruned: raw texts are kept for failed runs and the last TOOLWIRE_KEEP_RAW_RUNS]"


class Store(StoreFile):
    """One DuckDB store file; safe to share between threads, polite to other processes."""

    # -- writers -----------------------------------------------------------------------

    def record_spec(
        self, spec_hash: str, name: str, version: str, yaml_text: str, canonical_json: str
    ) -> None:
        """Store a spec once per content hash (later calls with the same hash are no-ops)."""
        if self._known("spec", spec_hash):
            return
        with self._transaction("record_spec") as con:
            con.execute(
                "INSERT OR IGNORE INTO specs VALUES (?, ?, ?, ?, ?, ?)",
                [spec_hash, name, version, yaml_text, canonical_json, _utcnow()],
            )
        self._locks.shared.memo.add(("spec", spec_hash))  # committed: true in any open

    def record_pack(
        self, pack_hash: str, manifest_json: str, files: dict[str, tuple[str, bytes]]
    ) -> None:
        """Store a prompt pack and its files (name -> (sha256, bytes)) once per pack hash."""
        if self._known("pack", pack_hash):
            return
        rows = pack_file_rows(pack_hash, files)
        with self._transaction("record_pack") as con:
            con.execute(
                "INSERT OR IGNORE INTO prompt_packs VALUES (?, ?, ?)",
                [pack_hash, manifest_json, _utcnow()],
            )
            self._insert_arrow(con, "prompt_pack_files", rows, ignore=True)
        self._locks.shared.memo.add(("pack", pack_hash))  # committed: true in any open

    def _known(self, kind: str, content_hash: str) -> bool:
        """Whether this process stored ``content_hash`` since it last opened the file.

        Saves a transaction per run for the spec and pack, which are content-addressed
        and append-only: a row we wrote while holding the file is still there.
        """
        with self._connect(write=False):
            return (kind, content_hash) in self._locks.shared.memo

    def start_run(self, run: dict[str, Any]) -> None:
        """Insert the run row at start (status 'running'), so a crashed run stays visible."""
        unknown = sorted(set(run) - set(RUN_COLUMNS))
        if unknown:
            raise StoreError(f"start_run: unknown runs columns {unknown}")
        if not run.get("run_id"):
            raise StoreError("start_run: run_id is required")
        row = dict(run)
        for key, default in (("status", "running"), ("dry_run", False), ("turns", 0)):
            if row.get(key) is None:
                row[key] = default
        if row["status"] not in RUN_STATUSES:
            raise StoreError(f"start_run: status must be one of {RUN_STATUSES}")
        row["started_at"] = _to_timestamp(row.get("started_at"), "started_at") or _utcnow()
        row["ended_at"] = _to_timestamp(row.get("ended_at"), "ended_at")
        settings = row.get("settings_json")
        if settings is not None and not isinstance(settings, str):
            row["settings_json"] = json.dumps(settings, sort_keys=True, default=str)
        cols = list(row)
        sql = f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        with self._transaction("start_run") as con:
            con.execute(sql, [row[c] for c in cols])

    def record_attempt(self, run_id: str, attempt: Attempt) -> None:
        """Store one model attempt now, in its own small transaction.

        Durable immediately: the raw text survives a crash later in the run.
        """
        prompt_json = json.dumps(attempt.prompt, ensure_ascii=False, default=str)
        values = [
            run_id,
            attempt.turn,
            attempt.attempt,
            attempt.kind,
            attempt.request_id,
            storable_text(prompt_json),
            storable_text(attempt.raw_text),
            attempt.parse_ok,
            attempt.error_code,
            list(attempt.error_codes),
            attempt.input_tokens,
            attempt.output_tokens,
            attempt.latency_ms,
            attempt.finish_reason,
            _to_timestamp(attempt.started_at, "started_at"),
        ]
        with self._transaction("record_attempt") as con:
            self._require_run(con, run_id)
            con.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * len(values))})", values)

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        error_code: str | None,
        error_message: str | None,
        turns: int,
        operations: list[OperationOutcome],
        tool_calls: list[dict[str, Any]],
        report_markdown: str | None,
        flow_run_id: str | None = None,
        note_changes: Sequence[tuple[str, str, str, str]] = (),
    ) -> None:
        """Close a run in ONE transaction: operations, tool calls, report and the runs row.

        Either all of it lands or none does (the run then stays 'running').
        ``note_changes``: (path, field, old, new) per changed field of a note.
        """
        if status not in RUN_STATUSES or status == "running":
            ended = ", ".join(RUN_STATUSES[1:])
            raise StoreError(f"finish_run: status must be one of {ended}, got {status!r}")
        bad = {o.status for o in operations} - set(OPERATION_STATUSES)
        if bad:
            raise StoreError(f"finish_run: unknown operation statuses {sorted(bad)}")
        # Build the Arrow tables before taking the lock: Python work stays outside it.
        op_rows = operation_rows(run_id, operations)
        call_rows = tool_call_rows(run_id, tool_calls)
        change_rows = note_change_rows(run_id, note_changes)
        with self._transaction(f"finish_run {run_id}") as con:
            previous = self._require_run(con, run_id)
            if previous != "running":
                raise StoreError(f"finish_run: run {run_id} already finished ({previous})")
            con.execute(
                "UPDATE runs SET status = ?, error_code = ?, error_message = ?, turns = ?, "
                "ended_at = ?, flow_run_id = coalesce(?, flow_run_id) WHERE run_id = ?",
                [status, error_code, error_message, turns, _utcnow(), flow_run_id, run_id],
            )
            self._insert_arrow(con, "tool_calls", call_rows)
            self._insert_arrow(con, "operations", op_rows)
            self._insert_arrow(con, "note_changes", change_rows)
            if report_markdown is not None:
                con.execute(
                    "INSERT INTO reports VALUES (?, ?, ?)", [run_id, report_markdown, _utcnow()]
                )

    def write_rows(
        self, table_name: str, rows: pa.Table, *, upsert: bool = False, what: str = ""
    ) -> None:
        """Bulk-insert ``rows`` (Arrow) in one transaction; ``upsert`` replaces rows with
        the same primary key (``INSERT OR REPLACE``). For tables other store modules
        own (``store.evidence``): the Store stays the only writer."""
        if rows.num_rows == 0:
            return
        with self._transaction(what or f"write {table_name}") as con:
            if upsert:
                view = f"_{table_name}_rows"
                cols = ", ".join(rows.column_names)
                con.register(view, rows)
                con.execute(
                    f"INSERT OR REPLACE INTO {table_name} ({cols}) SELECT {cols} FROM {view}"
                )
                con.unregister(view)
            else:
                self._insert_arrow(con, table_name, rows)

    def prune_raw_texts(self, keep_last: int) -> int:
        """Drop the prompts and raw replies of ok runs older than the newest ``keep_last``
        ok runs (failed and running runs keep theirs); rows, counts, codes and reports
        stay. Returns how many attempts were pruned. The space is reused by later writes,
        so a store written by nightly runs stops growing with their raw texts."""
        old_runs = (
            "SELECT run_id FROM runs WHERE status = 'ok' ORDER BY started_at DESC, run_id OFFSET ?"
        )
        with self._transaction("prune raw texts") as con:
            pruned = con.execute(
                f"UPDATE attempts SET prompt_json = NULL, raw_text = '{PRUNED}' "
                f"WHERE prompt_json IS NOT NULL AND run_id IN ({old_runs})",
                [int(keep_last)],
            ).fetchall()
            con.execute(
                "UPDATE tool_calls SET args_json = NULL, result_text = NULL "
                f"WHERE (args_json IS NOT NULL OR result_text IS NOT NULL) "
                f"AND run_id IN ({old_runs})",
                [int(keep_last)],
            )
        return int(pruned[0][0]) if pruned else 0

    def delete_keys(self, table_name: str, where: str, params: list[Any]) -> None:
        """``DELETE FROM table_name WHERE where`` in one transaction (cache eviction)."""
        with self._transaction(f"delete from {table_name}") as con:
            con.execute(f"DELETE FROM {table_name} WHERE {where}", params)

    def mark_embeddings_used(self, embedder: str, used: pa.Table, day: date) -> int:
        """Set ``embedding_cache.last_used`` to ``day`` for the rows of ``embedder`` named
        by ``used`` (columns ``kind``, ``text_sha256``) in one UPDATE ... FROM (DuckDB's
        fast path; an UPDATE per row is its slow one). Rows already at ``day`` or later
        are not touched. Returns how many rows were updated."""
        if used.num_rows == 0:
            return 0
        with self._transaction("mark embeddings used") as con:
            con.register("_embeddings_used", used)
            try:
                got = con.execute(
                    "UPDATE embedding_cache c SET last_used = ? FROM _embeddings_used u "
                    "WHERE c.text_sha256 = u.text_sha256 AND c.kind = u.kind "
                    "AND c.embedder = ? AND c.last_used < ?",
                    [day, embedder, day],
                ).fetchall()
            finally:
                con.unregister("_embeddings_used")
        return int(got[0][0]) if got else 0

    def evict_embeddings(self, unused_since: date) -> int:
        """Delete cached embeddings last used before ``unused_since``; returns how many.
        DuckDB reuses the freed blocks for later writes, so the file stops growing."""
        with self._transaction("evict embeddings") as con:
            got = con.execute(
                "DELETE FROM embedding_cache WHERE last_used < ?", [unused_since]
            ).fetchall()
        return int(got[0][0]) if got else 0

    def query_arrow(
        self, sql: str, params: list[Any] | None = None, *, inputs: dict[str, Any] | None = None
    ) -> pa.Table:
        """A read as an Arrow table; ``inputs`` are Arrow tables the SQL may name
        (a batch of keys to look up in one query, not one query per key)."""
        with self._connect(write=False) as con:
            try:
                for name, table in (inputs or {}).items():
                    con.register(name, table)
                return con.sql(sql, params=params or None).to_arrow_table()
            except duckdb.Error as exc:
                raise StoreError(f"SQL error: {_one_line(exc)}") from exc
            finally:
                for name in inputs or {}:
                    try:
                        con.unregister(name)
                    except duckdb.Error:
                        pass

    def record_warnings(self, run_id: str, warnings: list[str]) -> int:
        """Append a run's warnings (what it skipped or left as it was) to ``run_warnings``,
        numbered after those already stored; returns how many were stored."""
        if not warnings:
            return 0
        import pyarrow as pa

        texts = [storable_text(str(w)) for w in warnings]
        with self._transaction(f"record_warnings {run_id}") as con:
            self._require_run(con, run_id)
            # fetchall, not fetchone: DuckDB refuses to register a table on a connection
            # with a result not read to its end.
            got = con.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM run_warnings WHERE run_id = ?", [run_id]
            ).fetchall()
            first = int(got[0][0]) if got else 0
            rows = pa.table(
                {
                    "run_id": pa.array([run_id] * len(texts), pa.string()),
                    "seq": pa.array(range(first, first + len(texts)), pa.int32()),
                    "message": pa.array(texts, pa.string()),
                    "created_at": pa.array([_utcnow()] * len(texts), pa.timestamp("us")),
                }
            )
            self._insert_arrow(con, "run_warnings", rows)
        return len(texts)

    def run_warnings(self, run_id: str) -> list[str]:
        """The warnings stored for ``run_id``, in order."""
        _, rows = self.query(
            "SELECT message FROM run_warnings WHERE run_id = ? ORDER BY seq", [run_id]
        )
        return [str(r[0]) for r in rows]

    def mark_operations_undone(self, run_id: str) -> int:
        """Flip a run's applied operations to 'undone'; returns how many changed."""
        with self._transaction(f"mark_operations_undone {run_id}") as con:
            self._require_run(con, run_id)
            row = con.execute(
                "UPDATE operations SET status = 'undone' WHERE run_id = ? AND status = 'applied'",
                [run_id],
            ).fetchone()
        return int(row[0]) if row else 0

    def update_report(self, run_id: str, change: Callable[[str], str]) -> str | None:
        """Rewrite a run's stored markdown report with ``change`` (``toolwire undo`` marks
        it undone); the new report, or None when the run has none."""
        with self._transaction(f"update_report {run_id}") as con:
            row = con.execute("SELECT markdown FROM reports WHERE run_id = ?", [run_id]).fetchone()
            if not row or row[0] is None:
                return None
            markdown = change(str(row[0]))
            con.execute("UPDATE reports SET markdown = ? WHERE run_id = ?", [markdown, run_id])
        return markdown

    def write(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        """Run ONE parameterised INSERT in its own transaction; returns its RETURNING rows.

        For append-only tables other modules own (``profiles``): the Store stays the
        only writer, and anything but an INSERT is refused, so history is never rewritten.
        """
        with self._transaction("write") as con:
            statements = con.extract_statements(sql)
            if len(statements) != 1 or statements[0].type.name != "INSERT":
                raise StoreError("Store.write runs exactly one INSERT statement")
            cursor = con.execute(sql, params or [])
            return cursor.fetchall() if cursor.description else []

    # -- readers -----------------------------------------------------------------------

    def run_ids(self, *, limit: int | None = None, status: str | None = None) -> list[str]:
        """Run ids, newest first, optionally only those with ``status``."""
        sql = "SELECT run_id FROM runs"
        params: list[Any] = []
        if status is not None:
            sql += " WHERE status = ?"
            params.append(status)
        sql += " ORDER BY started_at DESC, run_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [row[0] for row in self.query(sql, params)[1]]

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The runs row for ``run_id`` or a unique prefix of it."""
        if not run_id:
            raise RunNotFound("empty run id")
        cols = ", ".join(RUN_COLUMNS)
        _, rows = self.query(f"SELECT {cols} FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            _, rows = self.query(
                f"SELECT {cols} FROM runs WHERE starts_with(run_id, ?) ORDER BY run_id LIMIT 6",
                [run_id],
            )
        if not rows:
            raise RunNotFound(f"no run {run_id!r} in {self.path}")
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise UsageError(f"run id prefix {run_id!r} is ambiguous: {shown}")
        return dict(zip(RUN_COLUMNS, rows[0], strict=True))
