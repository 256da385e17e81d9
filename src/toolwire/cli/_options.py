"""Options shared by several commands, defined once so their help stays the same."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from toolwire.run.base import ResolvedSpec

__all__ = ["DbOption", "check_same_job", "check_user"]


def _existing_store_file(value: Path | None) -> Path | None:
    """``--db`` names a store file (``locations.store_file_problem``): a FIFO hung
    `profile show` and `store merge`."""
    from toolwire.spec.locations import store_file_problem

    problem = None if value is None else store_file_problem(value)
    if problem:
        from toolwire.errors import UsageError

        raise UsageError(f"--db: {problem}")
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
    from toolwire.spec.values import user_id_problem

    problem = None if user is None else user_id_problem(user)
    if problem:
        raise UsageError(f"--user: {problem}")
    return user


def check_same_job(
    spec: Path,
    resolved: ResolvedSpec,
    cli_transport: str | None,
    *,
    flag: str = "--tooling-transport",
) -> None:
    """A transport override keeps the spec's job: a librarian spec (xml_attrless) is not
    run as a tool agent, nor a tool-agent spec as the librarian (``--tooling-transport
    xml_attrless`` on agent-xml.yaml started a run that died with INTERNAL_ERROR
    ``KeyError: 'propose'``: its pack has no librarian stage). ``resolved`` is the run's
    spec as read once, with the transport chosen (flag > TOOLWIRE_TRANSPORT > spec)."""
    from toolwire.errors import UsageError

    declared = resolved.loaded.spec.transport
    chosen = resolved.transport
    if (declared == "xml_attrless") == (chosen == "xml_attrless"):
        return
    source = flag if cli_transport else "TOOLWIRE_TRANSPORT"
    kind = "librarian" if declared == "xml_attrless" else "tool-agent"
    allowed = "xml_attrless only" if kind == "librarian" else "native, xml, xml-final, execute, xct"
    raise UsageError(
        f"{source} {chosen!r}: {spec} is a {kind} spec (transport {declared}); "
        f"it runs over {allowed}"
    )
