"""`toolwire` command line: a Typer app assembled from one module per command group.

Start-up stays fast because command modules import nothing heavy at module
level: Prefect, Great Expectations, DuckDB and llama.cpp are imported inside
the commands that need them.
"""

from __future__ import annotations

import sys

import typer

from toolwire.cli import _output

app = typer.Typer(
    name="toolwire",
    help="Run LLM agents from declarative YAML specs; every attempt lands in DuckDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _register() -> None:
    # Each module adds its commands to `app`; importing them is cheap by design.
    from toolwire.cli import ops_cmds, pack_cmds, profile_cmds, run_cmds, spec_cmds, store_cmds

    app.add_typer(spec_cmds.app, name="spec")
    app.add_typer(pack_cmds.app, name="pack")
    store_cmds.register(app)
    run_cmds.register(app)
    ops_cmds.register(app)
    profile_cmds.register(app)


_register()


def main() -> None:
    """Console-script entry: one clear line and a non-zero exit for every known error."""
    from toolwire.errors import SpecError, ToolwireError, UsageError

    try:
        app()
    except SpecError as exc:
        for issue in exc.issues:  # one line per problem, as `spec check` prints them
            _output.stderr.print(f"error: {issue}", markup=False, highlight=False)
        sys.exit(2)
    except UsageError as exc:
        _output.error_line(exc)
        sys.exit(2)
    except ToolwireError as exc:
        _output.error_line(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        _output.stderr.print("interrupted")
        sys.exit(130)
