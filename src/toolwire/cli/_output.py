"""Shared console output for CLI commands: Rich consoles and the one-line error format."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def error_line(exc: BaseException | str) -> None:
    """Print an error as one line on stderr: ``error: CODE: message``."""
    stderr.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
