"""Placeholder: replaced by the module's owner."""

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
