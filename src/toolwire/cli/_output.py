"""Shared console output for CLI commands: Rich consoles and the one-line error format.

Text from notes, models and the store is printed as text (issue 45 items 11 and 14):
markup is off on both consoles, so ``x[/b]y.md`` or ``Fix [/bold] later`` is printed as
written instead of crashing the run summary with a ``MarkupError`` (``[bold red]`` is
no style either), and :func:`shown` writes control characters as escapes (``\\x1b``),
so a note's escape sequences cannot clear the screen or plant a link.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape

__all__ = ["error_line", "shown", "stderr", "stdout"]

stdout = Console(highlight=False, soft_wrap=True, markup=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

# C0 and C1 controls but tab and newline, DEL, and the bidi overrides and isolates (they
# reorder what follows on the line: "txt.exe" shown as "exe.txt").
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` safe to print on a terminal: each control character as its escape."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def error_line(exc: BaseException | str) -> None:
    """Print an error as one line on stderr: ``error: CODE: message``."""
    stderr.print(f"[bold red]error:[/] {escape(shown(str(exc)))}", markup=True, highlight=False)
