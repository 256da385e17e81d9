"""The `toolwire runs` table: the run id always shows, whatever the terminal's width.

Rich fits a wide table into a narrow terminal by shrinking columns, and at 80
or 100 columns it shrank the run id away: the one value `show`, `undo` and
`report` need. Here columns have a rank; the least useful ones are left out
until the rest fits at its natural width (a line under the table names them,
and ``--format csv`` has them all), and the run id never wraps or shrinks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from toolwire.cli import _output

__all__ = ["runs_table"]

Row = dict[str, Any]


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _planned(r: Row) -> str:
    # A dry run's operations stay 'planned'; other runs plan nothing they did not apply.
    return str(r.get("ops_planned", 0) or 0) if r.get("dry_run") else "-"


def _secs(r: Row) -> str:
    return f"{r['duration_s']:.1f}" if r.get("duration_s") is not None else "-"


def _started(r: Row) -> str:
    return r["started_at"].strftime("%m-%d %H:%M:%S") if r.get("started_at") else "-"


@dataclass(frozen=True)
class _Column:
    name: str
    cell: Callable[[Row], str]
    right: bool = False
    fold: bool = False  # long free text (spec, model): may wrap on a narrow terminal


# Display order; RANK lists them from the first to leave out to the last.
_COLUMNS = (
    _Column("run", lambda r: r["run_id"][:12]),  # `show` accepts a unique prefix
    _Column("started UTC", _started),
    _Column("spec", lambda r: _text(r["spec_name"]), fold=True),
    _Column(
        "model",
        lambda r: f"{_text(r['provider'])}:{_text(r['model'])} {_text(r['transport'])}",
        fold=True,
    ),
    _Column("status", lambda r: ""),  # styled by the caller's status_text
    _Column("turns", lambda r: str(r["turns"]), right=True),
    _Column("att/rep", lambda r: f"{r['attempts']}/{r['repairs']}", right=True),
    _Column(
        "ops a/r/d",
        lambda r: f"{r['ops_applied']}/{r['ops_rejected']}/{r['ops_deferred']}",
        right=True,
    ),
    _Column("planned", _planned, right=True),
    _Column(
        "tok in/out",
        lambda r: f"{_text(r['input_tokens'])}/{_text(r['output_tokens'])}",
        right=True,
    ),
    _Column("secs", _secs, right=True),
)
_RANK = ("tok in/out", "att/rep", "model", "turns", "secs", "started UTC", "planned")
_KEPT = ("run", "status", "spec", "ops a/r/d")  # never left out


def _build(
    title: str, shown: Sequence[_Column], rows: Sequence[Row], status: Callable[[Row], Text]
) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for col in shown:
        if col.name == "run":
            table.add_column(col.name, no_wrap=True, min_width=12)
        elif col.fold:
            table.add_column(col.name, overflow="fold", min_width=6)
        else:
            table.add_column(col.name, justify="right" if col.right else "left", no_wrap=True)
    for r in rows:
        table.add_row(
            *(status(r) if c.name == "status" else Text(_output.shown(c.cell(r))) for c in shown)
        )
    return table


def runs_table(
    title: str,
    rows: Sequence[Row],
    width: int,
    status: Callable[[Row], Text],
    console: Console,
) -> tuple[Table, list[str]]:
    """The table for ``width`` columns, and the names of the columns left out."""
    shown = list(_COLUMNS)
    left_out: list[str] = []
    wide = console.options.update_width(100_000)  # the natural width, not one fitted to a max
    for name in (*_RANK, None):
        table = _build(title, shown, rows, status)
        if Measurement.get(console, wide, table).maximum <= width or name is None:
            return table, left_out
        assert name not in _KEPT
        shown = [c for c in shown if c.name != name]
        left_out.append(name)
    raise AssertionError("unreachable")
