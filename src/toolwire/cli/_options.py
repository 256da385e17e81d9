"""Options shared by several commands, defined once so their help stays the same."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DbOption", "check_user"]

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
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
