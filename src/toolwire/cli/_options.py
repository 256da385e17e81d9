"""Options shared by several commands, defined once so their help stays the same."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DbOption", "check_user"]


def _existing_store_file(value: Path | None) -> Path | None:
    """``--db`` names a store file: one that exists is a regular file (a FIFO hung
    `profile show` and `store merge`; a folder or a device failed later in DuckDB)."""
    if value is not None and value.expanduser().exists() and not value.expanduser().is_file():
        from toolwire.errors import UsageError

        kind = "a folder" if value.expanduser().is_dir() else "not a regular file"
        raise UsageError(f"--db: {value} is {kind}, not a store file")
    return value


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        callback=_existing_store_file,
        help="DuckDB store file [default: $TOOLWIRE_DB, else "
        "~/.local/share/toolwire/toolwire.duckdb; `toolwire store path` prints it]",
    ),
]


def check_user(user: str | None) -> str | None:
    """``--user`` as given, or a UsageError: the same rule as TOOLWIRE_USER (a blank id
    was stored by a run, then refused by ``profile show``; a newline broke its lines)."""
    from toolwire.errors import UsageError
    from toolwire.spec_values import user_id_problem

    problem = None if user is None else user_id_problem(user)
    if problem:
        raise UsageError(f"--user: {problem}")
    return user
