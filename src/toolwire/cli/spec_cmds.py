"""Placeholder: replaced by the module's owner."""

import typer

app = typer.Typer(no_args_is_help=True)
