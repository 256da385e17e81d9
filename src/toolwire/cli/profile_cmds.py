"""`toolwire profile show|reset USER`: what toolwire remembers about a user (seed 004).

Profiles are versioned in the store (``profiles``): ``show`` prints the newest
version, the USER CONTEXT the next run gets and the recent history; ``reset``
appends an empty version (history stays queryable with ``toolwire sql``).
DuckDB is imported inside the commands, so ``toolwire --help`` stays fast.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from toolwire.cli import _output
from toolwire.cli._options import DbOption
from toolwire.errors import StoreError, ToolwireError, UsageError

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = ["app", "register"]

app = typer.Typer(
    name="profile",
    help="Show or reset a user's profile (situated memory, seed 004).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

UserArgument = Annotated[str, typer.Argument(help="User id (as given to `toolwire run --user`).")]
HISTORY_SHOWN = 10


class ProfileFormat(StrEnum):
    table = "table"
    json = "json"


def register(root: typer.Typer) -> None:
    """Add the ``profile`` command group to the root app."""
    root.add_typer(app, name="profile")


def _open_store(db: Path | None) -> Store:
    """The store to read/write; an explicit --db must exist (a typo must not create one)."""
    from toolwire.spec.settings import load_settings
    from toolwire.store import Store

    settings = load_settings()
    path = db if db is not None else settings.db
    if db is not None and not path.exists():
        raise StoreError(f"no store file at {path} (pass --db PATH or set TOOLWIRE_DB)")
    return Store(path, lock_timeout_s=settings.db_lock_timeout_s)


def _fail(exc: ToolwireError) -> typer.Exit:
    _output.error_line(exc)
    return typer.Exit(2 if isinstance(exc, UsageError) else 1)


def _when(value: Any) -> str | None:
    return value.isoformat(sep=" ", timespec="seconds") if value is not None else None


@app.command("show")
def show_command(
    user: UserArgument,
    db: DbOption = None,
    output: Annotated[
        ProfileFormat, typer.Option("--format", help="table (readable) or json")
    ] = ProfileFormat.table,
) -> None:
    """Show a user's newest profile, the USER CONTEXT it gives and its version history."""
    from toolwire.memory.profiles import (
        load_profile,
        profile_history,
        profile_prompt_context,
    )

    try:
        store = _open_store(db)
        history = profile_history(store, user, limit=HISTORY_SHOWN)
        profile = history[0].profile if history else load_profile(store, user)
        context = profile_prompt_context(store, user)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    versions: list[dict[str, Any]] = [
        {
            "version": h.version,
            "created_at": _when(h.created_at),
            "interactions": h.interactions,
            "source": h.source,
            "run_id": h.run_id,
        }
        for h in history
    ]
    if output is ProfileFormat.json:
        document = {
            "user_id": user,
            "version": history[0].version if history else 0,
            "profile": profile.to_dict(),
            "context": context,
            "versions": versions,
        }
        _output.stdout.out(json.dumps(document, ensure_ascii=False, indent=2), highlight=False)
        return
    out = _output.stdout
    if not history:
        out.print(Text(f"no profile for {user!r} in {store.path} yet (version 0)"))
        return
    latest = versions[0]
    out.print(
        Text(
            f"profile of {user!r}: version {latest['version']} ({latest['source']}), "
            f"{latest['interactions']} interactions, updated {latest['created_at']}"
        )
    )
    out.print(Text(context or "USER CONTEXT: (empty)"))
    out.print(Text("versions (newest first):"))
    for v in versions:
        run = f" run {v['run_id'][:12]}" if v["run_id"] else ""
        out.print(
            Text(
                f"  v{v['version']}  {v['created_at']}  {v['source']:<13} "
                f"{v['interactions']} interactions{run}"
            )
        )


@app.command("reset")
def reset_command(user: UserArgument, db: DbOption = None) -> None:
    """Forget a user: append an empty profile version (older versions stay in the store)."""
    from toolwire.memory.profiles import reset_profile

    try:
        version = reset_profile(_open_store(db), user)
    except ToolwireError as exc:
        raise _fail(exc) from exc
    _output.stdout.print(Text(f"profile of {user!r} reset: version {version} is empty"))
