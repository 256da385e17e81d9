"""Many store files as one dataset: merge shards, export Parquet, query a folder of both.

DuckDB allows one writing process per file, so runs on other processes or
machines write their own shard (``<db>.shards/<worker>.duckdb``, see
``toolwire.flows.batch``). Three ways to make them one dataset:

* :func:`merge_stores` copies every row of each shard into one store file
  (idempotent: primary keys decide what is already there);
* :func:`export_parquet` writes each table of a store as ``<table>.parquet``;
* :func:`open_dataset` attaches ``.duckdb`` files read-only and reads ``.parquet``
  files, and creates one view per table unioning them all, plus the analysis
  views (``run_summary`` ...), in an in-memory database. User SQL over it runs in
  the sandbox (``store.sandbox.query_dataset_readonly``, which builds on this
  module; this module never imports the sandbox).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from toolwire.errors import StoreError, ToolwireError, UsageError
from toolwire.store import schema
from toolwire.store.store import Store

__all__ = [
    "EXPORT_MANIFEST",
    "MergeResult",
    "export_parquet",
    "merge_shard_dir",
    "merge_stores",
    "open_dataset",
    "store_write",
]

EXPORT_MANIFEST = "_toolwire_export.json"
# Parents first, so a reader of a half-merged file never sees an attempt without its run.
_TABLE_ORDER = (
    "specs",
    "prompt_packs",
    "prompt_pack_files",
    "runs",
    "run_warnings",
    "attempts",
    "tool_calls",
    "operations",
    "note_changes",
    "reports",
)
_SKIP_TABLES = frozenset({"schema_version"})
# Caches a run rebuilds from the notes: a merge leaves them out (issue 45 item 16: a
# shard's rotated topic vectors, taken as they were, filed 4 of 4 recipes as security;
# a row keyed by a text's hash cannot be checked without the text).
_CACHE_TABLES = frozenset({"embedding_cache", "note_evidence"})
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class MergeResult:
    """Rows copied per table, summed over sources, and the sources merged."""

    rows: dict[str, int] = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # cache rows not taken

    @property
    def total(self) -> int:
        return sum(self.rows.values())


@contextmanager
def store_write(store: Store, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """One write transaction on ``store`` for bookkeeping rows (batches, quality checks).

    Goes through the Store's own lock-aware transaction, so it serialises with
    every other writer of the file in this process and waits politely for others.
    """
    with store._transaction(what) as con:
        yield con


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    # Table and column names come from DuckDB's catalog, but a shard is untrusted input.
    if not _IDENT.match(name):
        raise StoreError(f"unexpected table or column name {name!r} in a store file")
    return name


def _tables(con: duckdb.DuckDBPyConnection, database: str) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'",
        [database],
    ).fetchall()
    names = {str(r[0]) for r in rows} - _SKIP_TABLES
    ordered = [t for t in _TABLE_ORDER if t in names]
    return ordered + sorted(names - set(ordered))


def _columns(con: duckdb.DuckDBPyConnection, database: str, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? "
        "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
        [database, table],
    ).fetchall()
    return [_ident(str(r[0])) for r in rows]


def _has_primary_key(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE database_name = current_database() "
        "AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchone()
    return bool(row and row[0])


def _source_version(con: duckdb.DuckDBPyConnection, alias: str, path: Path) -> int:
    try:
        row = con.execute(
            f"SELECT coalesce(max(version), 0) FROM {alias}.schema_version"
        ).fetchone()
    except Exception as exc:  # duckdb.CatalogException: not a toolwire store
        raise StoreError(f"{path} is not a toolwire store (no schema_version table)") from exc
    version = int(row[0]) if row else 0
    if version > schema.LATEST_VERSION:
        raise StoreError(
            f"{path} has store schema version {version}, newer than this toolwire "
            f"supports ({schema.LATEST_VERSION}); merge it with a newer toolwire"
        )
    return version


def _merge_one(
    con: duckdb.DuckDBPyConnection, alias: str, path: Path
) -> tuple[dict[str, int], dict[str, int]]:
    """(rows copied, cache rows left out) per table."""
    _source_version(con, alias, path)
    row = con.execute("SELECT current_database()").fetchone()
    target = str(row[0]) if row else "main"
    target_tables = set(_tables(con, target))
    copied: dict[str, int] = {}
    left_out: dict[str, int] = {}
    for table in _tables(con, alias):
        if table not in target_tables:
            raise StoreError(f"{path}: table {table!r} is unknown to the target store")
        if table in _CACHE_TABLES:
            counted = con.execute(f"SELECT count(*) FROM {alias}.{table}").fetchone()
            left_out[table] = int(counted[0]) if counted else 0
            continue
        # Columns both sides have: an older shard lacks newer columns (they stay NULL).
        target_cols = set(_columns(con, target, table))
        cols = [c for c in _columns(con, alias, table) if c in target_cols]
        col_list = ", ".join(cols)
        if table == "runs":
            # A run seen 'running' here but finished in the shard: the shard's row wins.
            con.execute(
                "DELETE FROM runs WHERE status = 'running' AND run_id IN "
                f"(SELECT run_id FROM {alias}.runs WHERE status <> 'running')"
            )
        if _has_primary_key(con, table):
            sql = (
                f"INSERT OR IGNORE INTO {table} ({col_list}) SELECT {col_list} FROM {alias}.{table}"
            )
        else:
            sql = (
                f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM {alias}.{table} "
                f"EXCEPT SELECT {col_list} FROM {table}"
            )
        row = con.execute(sql).fetchone()
        copied[table] = int(row[0]) if row else 0
    return copied, left_out


def merge_stores(target: Store | str | Path, sources: Sequence[str | Path]) -> MergeResult:
    """Copy every row of each source store file into ``target``; safe to repeat.

    Each source is merged in one transaction (all of its rows or none). Rows whose
    primary key is already in the target are kept as they are, except a run the
    target still has as 'running' that the source has finished. Cached embeddings and
    decisions are left out (counted in ``left_out``): the next run recomputes them.
    """
    store = target if isinstance(target, Store) else Store(target)
    result = MergeResult()
    for i, source in enumerate(sources):
        path = Path(source).expanduser().resolve()
        if path == store.path:
            raise UsageError(f"cannot merge {path} into itself")
        if not path.is_file():
            raise UsageError(f"no store file at {path}")
        alias = f"toolwire_merge_{i}"
        with store._connect(write=True) as con:
            # ATTACH/DETACH stay outside the transaction: DuckDB refuses to detach a
            # database the open transaction has read from.
            try:
                con.execute(f"ATTACH {_sql_literal(str(path))} AS {alias} (READ_ONLY)")
            except duckdb.Error as exc:
                raise StoreError(f"cannot open shard {path}: {exc}") from exc
            try:
                con.execute("BEGIN TRANSACTION")
                try:
                    copied, left_out = _merge_one(con, alias, path)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
            except duckdb.Error as exc:
                raise StoreError(f"merging {path} failed: {exc}") from exc
            finally:
                con.execute(f"DETACH {alias}")
        for table, n in copied.items():
            result.rows[table] = result.rows.get(table, 0) + n
        for table, n in left_out.items():
            result.left_out[table] = result.left_out.get(table, 0) + n
        result.sources.append(path)
    return result


def merge_shard_dir(db: str | Path, shard_dir: str | Path) -> list[Path]:
    """Merge every ``*.duckdb`` shard in ``shard_dir`` into ``db``, then delete them.

    The shards are kept when the merge fails (the error names the command that
    retries). Markdown reports workers wrote next to their shards
    (``shard_dir/reports``) move next to ``db``.
    """
    db, shard_dir = Path(db), Path(shard_dir)
    shards = sorted(shard_dir.glob("*.duckdb")) if shard_dir.is_dir() else []
    if not shards:
        return []
    try:
        merge_stores(Store(db), shards)
    except ToolwireError as exc:
        raise StoreError(
            f"{exc.message}; the shards are kept: retry with "
            f"`toolwire store merge {shard_dir} --db {db}`"
        ) from exc
    for shard in shards:
        shard.unlink()
        shard.with_name(shard.name + ".wal").unlink(missing_ok=True)
        shard.with_name(shard.name + ".lock").unlink(missing_ok=True)  # store.connection's flock
    reports = shard_dir / "reports"
    if reports.is_dir():
        (db.parent / "reports").mkdir(parents=True, exist_ok=True)
        for report in reports.iterdir():
            report.replace(db.parent / "reports" / report.name)
        reports.rmdir()
    if not any(shard_dir.iterdir()):
        shard_dir.rmdir()
    return shards


def _write_parquet(result: duckdb.DuckDBPyRelation, target: Path) -> None:
    """A query's rows into one Parquet file, streamed batch by batch.

    The rows come from the sandboxed store connection as an Arrow stream; a
    private in-memory DuckDB that sees only that stream writes the file.
    """
    reader = result.to_arrow_reader(65_536)
    writer = duckdb.connect(":memory:")
    try:
        writer.register("export_rows", reader)
        writer.execute(f"COPY export_rows TO {_sql_literal(str(target))} (FORMAT parquet)")
    finally:
        writer.close()


def export_parquet(store: Store, out_dir: str | Path) -> dict[str, int]:
    """Write each table of ``store`` to ``out_dir/<table>.parquet``; returns rows per table.

    A manifest (``_toolwire_export.json``: schema version, time, row counts) goes
    next to the files so a reader can tell which toolwire wrote them.
    """
    out = Path(out_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    _, rows = store.query(
        "SELECT table_name, estimated_size FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = 'main' ORDER BY table_name"
    )
    counts: dict[str, int] = {}
    for (table,) in ((r[0],) for r in rows):
        if table in _SKIP_TABLES:
            continue
        name = _ident(str(table))
        target = out / f"{name}.parquet"
        # Rows streamed as Arrow batches and written here, not DuckDB's COPY: the store
        # is read in the sandbox (no file access from SQL, issue #30 item 8).
        with store._connect(write=False) as con:
            _write_parquet(con.sql(f"SELECT * FROM {name}"), target)
        counts[name] = int(store.query(f"SELECT count(*) FROM {name}")[1][0][0])
    manifest = {
        "schema_version": store.schema_version(),
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": str(store.path),
        "rows": counts,
    }
    (out / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return counts


def _schema_tables() -> tuple[set[str], list[str]]:
    """Table names of the latest schema, and the CREATE VIEW statements of every migration."""
    con = duckdb.connect(":memory:")
    try:
        views: list[str] = []
        for _, sql in schema.MIGRATIONS:
            for statement in con.extract_statements(sql):
                text = statement.query.strip()
                if re.match(r"(?is)^create\s+(or\s+replace\s+)?view\b", text):
                    views.append(text)
            con.execute(sql)
        return set(_tables(con, "memory")), views
    finally:
        con.close()


def _discover(
    paths: Sequence[str | Path], known: set[str]
) -> tuple[list[Path], dict[str, list[Path]]]:
    """Split inputs into DuckDB files and Parquet files grouped by table."""
    stores: list[Path] = []
    parquet: dict[str, list[Path]] = {}
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".duckdb", ".parquet"))
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"no such file or folder: {path}")
    for path in files:
        if path.suffix == ".duckdb":
            stores.append(path)
            continue
        if path.stem in known:
            table = path.stem
        elif path.parent.name in known:  # <table>/part-0.parquet (hive-style folders)
            table = path.parent.name
        else:
            raise UsageError(
                f"cannot tell which table {path} holds: name it <table>.parquet "
                f"or put it in a folder named after the table"
            )
        parquet.setdefault(table, []).append(path)
    if not stores and not parquet:
        raise UsageError(f"no .duckdb or .parquet files in {', '.join(map(str, paths))}")
    return stores, parquet


def _dedupe(con: duckdb.DuckDBPyConnection, table: str, union: str) -> str:
    """One row per primary key, as :func:`merge_stores` keeps: a finished run wins.

    The same spec or pack recorded by two shards differs in ``first_seen``, so
    a plain DISTINCT would count it twice.
    """
    rows = con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() "
        "WHERE database_name = 'toolwire_schema' AND table_name = ? "
        "AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchall()
    if not rows:
        return f"SELECT DISTINCT * FROM ({union})"
    keys = ", ".join(_ident(str(c)) for c in rows[0][0])
    order = "ORDER BY (status = 'running')" if table == "runs" else ""
    return f"SELECT * FROM ({union}) QUALIFY row_number() OVER (PARTITION BY {keys} {order}) = 1"


def open_dataset(
    paths: Sequence[str | Path], *, parquet_in_memory: bool = False
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose tables are views over every store file and Parquet file.

    Folders are searched recursively. Each table view is the union (by column
    name) of an empty table of the current schema and every source that has it,
    so older shards with fewer columns still read, with one row per primary key. Store files are
    attached read-only: a file a writer holds open cannot be read (DuckDB's lock).
    ``parquet_in_memory`` copies Parquet rows into memory instead of reading the
    files at query time, so the connection can then be cut off from every file
    (``store.sandbox``).
    """
    known, view_sql = _schema_tables()
    stores, parquet = _discover(paths, known)
    con = duckdb.connect(":memory:")
    try:
        con.execute("ATTACH ':memory:' AS toolwire_schema")
        con.execute("USE toolwire_schema")
        for _, sql in schema.MIGRATIONS:
            con.execute(sql)
        con.execute("USE memory")
        sources: dict[str, list[str]] = {t: [] for t in known}
        for i, path in enumerate(stores):
            alias = f"shard_{i}"
            try:
                con.execute(f"ATTACH {_sql_literal(str(path))} AS {alias} (READ_ONLY)")
            except duckdb.Error as exc:
                raise StoreError(f"cannot open {path} read-only: {exc}") from exc
            _source_version(con, alias, path)
            for table in _tables(con, alias):
                if table in sources:
                    sources[table].append(f"SELECT * FROM {alias}.{_ident(table)}")
        if parquet_in_memory and parquet:
            con.execute("ATTACH ':memory:' AS toolwire_parquet")
        for table, files in parquet.items():
            listed = ", ".join(_sql_literal(str(f)) for f in files)
            read = f"SELECT * FROM read_parquet([{listed}], union_by_name = true)"
            if parquet_in_memory:
                con.execute(f"CREATE TABLE toolwire_parquet.{_ident(table)} AS {read}")
                read = f"SELECT * FROM toolwire_parquet.{_ident(table)}"
            sources[table].append(read)
        for table in sorted(known):
            parts = [f"SELECT * FROM toolwire_schema.{table}", *sources[table]]
            union = " UNION ALL BY NAME ".join(parts)
            con.execute(f"CREATE VIEW {table} AS {_dedupe(con, table, union)}")
        for statement in view_sql:
            con.execute(statement)
    except BaseException:
        con.close()
        raise
    return con
