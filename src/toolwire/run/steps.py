"""A job's step runner: ``step(name, fn, *args)`` runs one named step of a run.

Every job takes one, so the same composition runs as plain calls (``direct_step``:
``--no-prefect``, batch items, tests), as Prefect tasks (``flows``) or announced
to the CLI (``phases.announcing``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["StepRunner", "direct_step"]

StepRunner = Callable[..., Any]


def direct_step(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run a step as a plain call."""
    return fn(*args)
