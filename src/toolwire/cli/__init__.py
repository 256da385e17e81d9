"""`toolwire` command line: a Typer app assembled from one module per command group.

Start-up stays fast because command modules import nothing heavy at module
level: Prefect, DuckDB and llama.cpp are imported inside
the commands that need them.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from toolwire.cli import _output

app = typer.Typer(
    name="toolwire",
    help="Run LLM agents from declarative YAML specs; every attempt lands in DuckDB.",
    no_args_is_help=True,
    # --install-completion / --show-completion for bash, zsh, fish and PowerShell.
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # Subcommands inherit this from the root context, so `toolwire run -h` works too.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolwire")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    # An eager option callback runs while parsing, before Click asks for a command.
    if value:
        _output.stdout.print(f"toolwire {_version()}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Run LLM agents from declarative YAML specs; every attempt lands in DuckDB."""
    if not _HELP_FLAGS.intersection(sys.argv[1:]):
        _refuse_empty_arguments(sys.argv[1:])
        # Every command reads TOOLWIRE_* settings the same way: a bad value is one line
        # and exit 2 here, before any command half-runs (help still works).
        from toolwire.spec.settings import load_settings

        load_settings()


def _refuse_empty_arguments(args: list[str]) -> None:
    """An empty argument is an error, never a default: ``--workspace "$NOTES"`` with
    NOTES unset made the librarian work on the current directory (an empty path is
    ``.``), ``--model ""`` silently ran the spec's model."""
    from toolwire.errors import UsageError

    for i, arg in enumerate(args):
        if arg == "--":
            return
        before = args[i - 1] if i else ""
        if arg.startswith("--") and arg.find("=") == len(arg) - 1 and len(arg) > 3:
            flag = arg[:-1]
        elif arg == "" and before.startswith("-") and "=" not in before:
            flag = before
        elif arg == "":
            raise UsageError("an empty argument (an unset shell variable?); give a value")
        else:
            continue
        raise UsageError(
            f"{flag}: empty value (an unset shell variable?); leave the option out for its default"
        )


_HELP_FLAGS = frozenset({"-h", "--help"})


def _register() -> None:
    # Each module adds its commands to `app`; importing them is cheap by design.
    from toolwire.cli import (
        ops_cmds,
        pack_cmds,
        profile_cmds,
        review_cmds,
        run_cmds,
        spec_cmds,
        store_cmds,
    )

    app.add_typer(spec_cmds.app, name="spec")
    app.add_typer(pack_cmds.app, name="pack")
    store_cmds.register(app)
    run_cmds.register(app)
    ops_cmds.register(app)
    profile_cmds.register(app)
    review_cmds.register(app)


_register()


def main() -> None:
    """Console-script entry: one clear line and a non-zero exit for every known error."""
    from toolwire.errors import PackError, SpecError, ToolwireError, UsageError

    try:
        app()
    except SpecError as exc:
        for issue in exc.issues:  # one line per problem, as `spec check` prints them
            _output.stderr.print(f"error: {issue}", markup=False, highlight=False)
        sys.exit(2)
    except (UsageError, PackError) as exc:  # the user's input to fix, like a bad spec
        _output.error_line(exc)
        sys.exit(2)
    except ToolwireError as exc:
        _output.error_line(exc)
        sys.exit(1)
    except OSError as exc:
        # An unwritable or missing path, a full disk: the user's environment, not a bug.
        _output.error_line(_os_error_text(exc))
        sys.exit(1)
    except KeyboardInterrupt:
        _output.stderr.print("interrupted")
        sys.exit(130)


def _os_error_text(exc: OSError) -> str:
    """``PermissionError(13, 'Permission denied', '/x')`` -> ``/x: Permission denied``."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{exc.filename}: {reason}"
    return reason
