"""`toolwire runs | show RUN_ID | sql QUERY`: look at what the store recorded.

DuckDB and the store are imported inside the commands so ``toolwire --help``
stays fast. Every command handles its own known errors (one line on stderr,
exit 1; exit 2 for usage errors) so it behaves the same under any Typer app.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime, time
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolwire.cli import _output
from toolwire.cli._options import DbOption
from toolwire.errors import ToolwireError, UsageError

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = ["register"]


_PIPE_WIDTH = 200


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def register(app: typer.Typer) -> None:
    """Add ``runs``, ``show`` and ``sql`` as top-level commands of ``app``."""
    app.command("runs")(runs_command)
    app.command("show")(show_command)
    app.command("sql")(sql_command)


# -- helpers -------------------------------------------------------------------------------


def _open_store(db: Path | None) -> Store:
    """The store a read command looks at (``--db``, else ``TOOLWIRE_DB`` or the default).

    Never created here: a command that only reads must not leave an empty store
    at a mistyped path; a missing file is an error naming it.
    """
    from toolwire.spec.settings import load_settings
    from toolwire.store.sandbox import SandboxedStore

    settings = load_settings()
    path = db if db is not None else settings.db
    # Sandboxed: the store's own views run here, and a store file may come from anywhere.
    return SandboxedStore(path, lock_timeout_s=settings.db_lock_timeout_s)


def _fail(exc: ToolwireError) -> typer.Exit:
    _output.error_line(exc)
    return typer.Exit(2 if isinstance(exc, UsageError) else 1)


def _text(value: Any) -> str:
    """One cell as plain text: NULL shown as '-', timestamps to the second."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float):
        # Plain digits, never "3.594e+04": latencies in ms, token rates, seconds.
        if abs(value) >= 1000:
            return f"{value:.0f}"
        return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
) -> Table:
    # Cells are Text, never markup: raw model output and paths may contain "[...]".
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(_output.shown(_text(v))) for v in row))
    return table


def _print_table(table: Table) -> None:
    # Piped output (files, grep, tests) has no width to fit: render wide rather than
    # fold every cell into 80 columns. A terminal keeps its own width.
    console = _output.stdout
    if not console.is_terminal:
        console = Console(
            file=console.file, width=_PIPE_WIDTH, highlight=False, soft_wrap=True, markup=False
        )
    console.print(table)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    return _json_default(value)


def _records(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _write_records(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: OutputFormat
) -> None:
    """Rows as a JSON array of objects or as CSV with a header (what `sql --format` writes)."""
    if fmt is OutputFormat.json:
        text = json.dumps(_records(columns, rows), default=_json_default, ensure_ascii=False)
        sys.stdout.write(text + "\n")
        return
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_csv_value(v) for v in row] for row in rows)
    sys.stdout.write(buffer.getvalue())


def _undone_runs(store: Store) -> dict[str, int]:
    """Runs whose changes ``toolwire undo`` took back, with how many operations (issue 42:
    an undone run still showed ``ok``)."""
    _, rows = store.query(
        "SELECT run_id, count(*) FROM operations WHERE status = 'undone' GROUP BY run_id"
    )
    return {str(run_id): int(n) for run_id, n in rows}


def _status_text(status: str) -> Text:
    styles = {"ok": "green", "unchecked": "cyan", "Failed": "bold red", "running": "yellow"}
    style = styles.get(status, "")
    return Text(status, style=style)


# -- runs ----------------------------------------------------------------------------------


def runs_command(
    db: DbOption = None,
    # At most 1,000,000 (as TOOLWIRE_KEEP_RAW_RUNS): a larger one was a DuckDB INT64 error.
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1_000_000, help="How many runs.")
    ] = 20,
    fmt: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="table for people; json/csv: every run_summary column"),
    ] = OutputFormat.table,
) -> None:
    """List recent runs (newest first) from the run_summary view."""
    try:
        store = _open_store(db)
        columns, rows = store.query(
            "SELECT * FROM run_summary ORDER BY started_at DESC, run_id LIMIT ?", [limit]
        )
        undone = _undone_runs(store)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    if fmt is not OutputFormat.table:  # an empty list is still valid JSON / a CSV header
        _write_records(columns, rows, fmt)
        return
    if not rows:
        _output.stdout.print(Text(f"no runs in {store.path}"))
        return
    from toolwire.cli._runs_table import runs_table

    def status_text(r: dict[str, Any]) -> Text:
        status = _status_text(r["status"])
        if r["error_code"]:
            status.append(f" {r['error_code']}")
        if r["run_id"] in undone:
            status.append(" undone", style="magenta")
        return status

    # The run id always shows: narrow terminals leave out the least useful columns.
    console = _output.stdout
    width = console.width if console.is_terminal else _PIPE_WIDTH
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    table, left_out = runs_table(f"runs in {store.path}", records, width, status_text, console)
    _print_table(table)
    if left_out:
        note = f"(not shown at this width: {', '.join(left_out)}; --format csv has all)"
        _output.stdout.print(Text(note), soft_wrap=False)  # wrapped to the terminal


# -- show ----------------------------------------------------------------------------------


class ShowPart(StrEnum):
    attempts = "attempts"
    operations = "operations"
    tool_calls = "tool_calls"


def show_command(
    run_id: Annotated[str, typer.Argument(help="Run id or a unique prefix of it.")],
    db: DbOption = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print every attempt's raw text.")] = False,
    fmt: Annotated[
        OutputFormat,
        typer.Option(
            "--format", "-f", help="json: the whole run as one object; csv: one table (--part)"
        ),
    ] = OutputFormat.table,
    part: Annotated[
        ShowPart, typer.Option(help="With --format csv: which rows to print.")
    ] = ShowPart.attempts,
) -> None:
    """Show one run: header, attempts, operations, tool calls (--raw: every raw text).

    Turns are numbered from 1, as in the run's report.
    """
    try:
        store = _open_store(db)
        run = store.get_run(run_id)
        full_id = run["run_id"]
        _, summary = store.query("SELECT duration_s FROM run_summary WHERE run_id = ?", [full_id])
        # The store numbers turns from 0; people (and the markdown report) count from 1.
        attempt_cols, attempts = store.query(
            "SELECT turn + 1 AS turn, attempt AS try, kind, parse_ok AS parse, error_code, "
            "error_codes AS details, input_tokens AS tok_in, output_tokens AS tok_out, "
            "latency_ms AS ms, finish_reason AS finish, raw_text FROM attempts "
            "WHERE run_id = ? ORDER BY turn, attempt",
            [full_id],
        )
        op_cols, operations = store.query(
            "SELECT turn + 1 AS turn, seq, kind, target, path, confidence AS conf, status, "
            "code, detail FROM operations WHERE run_id = ? ORDER BY turn, seq",
            [full_id],
        )
        call_cols, calls = store.query(
            "SELECT turn + 1 AS turn, seq, tool, source, status, duration_ms AS ms, args_bytes, "
            "result_bytes, error FROM tool_calls WHERE run_id = ? ORDER BY turn, seq",
            [full_id],
        )
        # An internal error's traceback lives in the run's report (Prefect logs one line).
        from toolwire.librarian.report import stored_traceback

        _, reports = store.query("SELECT markdown FROM reports WHERE run_id = ?", [full_id])
        trace = stored_traceback(reports[0][0] if reports else None)
    except ToolwireError as exc:
        raise _fail(exc) from exc

    if fmt is OutputFormat.json:
        document = {
            "run": {**run, "duration_s": summary[0][0] if summary else None},
            "traceback": trace,
            "attempts": _records(attempt_cols, attempts),
            "operations": _records(op_cols, operations),
            "tool_calls": _records(call_cols, calls),
        }
        sys.stdout.write(json.dumps(document, default=_json_default, ensure_ascii=False) + "\n")
        return
    if fmt is OutputFormat.csv:
        columns, rows = {
            ShowPart.attempts: (attempt_cols, attempts),
            ShowPart.operations: (op_cols, operations),
            ShowPart.tool_calls: (call_cols, calls),
        }[part]
        _write_records(columns, rows, fmt)
        return

    out = _output.stdout
    header = Text()
    header.append(f"run {full_id}  ", style="bold")
    header.append_text(_status_text(run["status"]))
    undone = _undone_runs(store).get(full_id)
    if undone:
        header.append(f"  undone ({undone} operation(s) taken back)", style="magenta")
    if run["error_code"]:
        header.append(f"  {run['error_code']}: {run['error_message'] or ''}")
    out.print(header)
    duration = summary[0][0] if summary else None
    for label, value in (
        ("spec", f"{_text(run['spec_name'])} ({_text(run['spec_hash'])})"),
        ("pack", _text(run["pack_hash"])),
        ("job", f"{_text(run['job'])}  dry_run={run['dry_run']}  turns={run['turns']}"),
        ("model", f"{_text(run['provider'])}:{_text(run['model'])} via {_text(run['transport'])}"),
        ("time", f"{_text(run['started_at'])} -> {_text(run['ended_at'])} ({_text(duration)} s)"),
        ("workspace", _text(run["workspace"])),
        ("user", _text(run["user_id"])),
        ("flow/batch", f"{_text(run['flow_run_id'])} / {_text(run['batch_id'])}"),
    ):
        out.print(Text(f"  {label:<11}{value}"))

    shown = [(*row[:3], "ok" if row[3] else "FAIL", *row[4:10]) for row in attempts]
    _print_table(_table(attempt_cols[:10], shown, title=f"attempts ({len(attempts)})"))
    _print_table(_table(op_cols, operations, title=f"operations ({len(operations)})"))
    if calls:
        _print_table(_table(call_cols, calls, title=f"tool calls ({len(calls)})"))
    if trace:
        out.rule(Text("traceback"))
        out.print(trace, markup=False, highlight=False, emoji=False)
    if raw:
        for row in attempts:
            out.rule(Text(f"turn {row[0]} attempt {row[1]} ({row[2]})"))
            out.print(row[10], markup=False, highlight=False, emoji=False)


# -- sql -----------------------------------------------------------------------------------


def sql_command(
    query: Annotated[str, typer.Argument(help="Read-only SQL, e.g. 'SELECT * FROM run_summary'.")],
    db: DbOption = None,
    fmt: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="Output format.")
    ] = OutputFormat.table,
    dataset: Annotated[
        list[Path] | None,
        typer.Option(help="Query folders/files of *.duckdb shards and *.parquet instead of --db."),
    ] = None,
    timeout: Annotated[
        float,
        # At most a day: inf or 1e308 printed an OverflowError traceback from a lock wait.
        typer.Option(
            "--timeout", min=0.1, max=86_400, help="Stop the query after this many seconds."
        ),
    ] = 120.0,
) -> None:
    """Run read-only SQL on the store: its tables and run_summary/tool_stats/repair_stats.

    The SQL reads the store (or the --dataset) and no other file: it cannot
    change the store, attach, copy, export, import or read files (store.sandbox).
    It runs at most --timeout seconds, in 1 GB of memory and 1 GB of spill, on a
    copy of the store taken when it starts (a run on the store never waits for it).
    """
    from toolwire.store.sandbox import DEFAULT_LIMITS

    limits = replace(DEFAULT_LIMITS, timeout_s=timeout)
    try:
        if dataset:
            from toolwire.store.user_sql import query_dataset_in_child

            columns, rows = query_dataset_in_child(dataset, query, limits=limits)
        else:
            from toolwire.spec.settings import load_settings
            from toolwire.store.user_sql import query_store_snapshot

            settings = load_settings()
            columns, rows = query_store_snapshot(
                db if db is not None else settings.db, query,
                lock_timeout_s=settings.db_lock_timeout_s, limits=limits,
            )  # fmt: skip
    except ToolwireError as exc:
        raise _fail(exc) from exc
    if fmt is OutputFormat.json:
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        sys.stdout.write(json.dumps(records, default=_json_default, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_csv_value(v) for v in row] for row in rows)
        sys.stdout.write(buffer.getvalue())
    else:
        _print_table(_table(columns, rows))
