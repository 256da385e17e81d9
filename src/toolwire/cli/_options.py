"""Options shared by several commands, defined once so their help stays the same."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DbOption"]

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="DuckDB store file [default: $TOOLWIRE_DB, else "
        "~/.local/share/toolwire/toolwire.duckdb; `toolwire store path` prints it]",
    ),
]
