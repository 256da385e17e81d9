"""Progress a person can follow, on a terminal or in a log file.

On a terminal a Rich bar redraws in place. Anywhere else (output piped to a file,
CI, ``nohup``) a bar draws nothing until the end, so a 17-minute run looked dead:
there each step prints one plain, timestamped line instead.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

__all__ = ["PHASE_LINE_EVERY", "StepProgress"]

PHASE_LINE_EVERY = 16  # items (notes) between two progress lines, off a terminal


class StepProgress:
    """``with StepProgress(console, "librarian", "request") as p: p.update(done, total)``."""

    def __init__(self, console: Console, label: str, unit: str) -> None:
        self.console, self.label, self.unit = console, label, unit
        self.started = time.monotonic()
        self._bar: Progress | None = None
        self._phase_done: dict[str, int] = {}
        self._task: Any = None
        if console.is_terminal:
            self._bar = Progress(
                TextColumn(f"[bold]{label}[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=console,
            )
            self._task = self._bar.add_task("", total=None)

    def __enter__(self) -> StepProgress:
        self.started = time.monotonic()
        if self._bar is not None:
            self._bar.start()
        else:
            self.line(f"{self.label}: started")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, done: int, total: int, note: str = "") -> None:
        """``done`` of ``total`` steps finished; ``note`` (a status) goes on the same line."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, description=note)
            return
        suffix = f" {note}" if note else ""
        self.line(f"{self.label}: {self.unit} {done}/{total} done{suffix}")

    def phase(self, name: str, done: int, total: int) -> None:
        """A phase without turns (embedding notes): the bar shows it; elsewhere one line per
        ~5 % of it (at least every PHASE_LINE_EVERY items) and one when it ends."""
        if total == 0:  # a step begins, its size unknown: say which
            if self._bar is not None:
                self._bar.update(self._task, description=name)
            else:
                self.line(f"{self.label}: {name}")
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, description=name)
            return
        step = max(PHASE_LINE_EVERY, total // 20)
        last = self._phase_done.get(name, 0)
        if done >= total or done - last >= step or last == 0:
            self._phase_done[name] = done
            self.line(f"{self.label}: {name} {done}/{total}")

    def line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        self.console.print(f"{text} ({elapsed:.1f} s)", markup=False, highlight=False)
