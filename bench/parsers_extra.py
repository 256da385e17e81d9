"""Inputs for figure 1's slot (seed 001) and execute (seed 000) parsers.

Each ``*_cases`` function takes the parser and returns ``Case``s: a text, a
call that parses it, and the floor (a ``str.find`` loop that slices out the
same tags' contents and checks nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Case", "execute_cases", "slot_cases"]


@dataclass(frozen=True)
class Case:
    label: str
    size: int  # bytes of the text
    parse: Callable[[], Any]
    scan: Callable[[], Any]


def slot_cases(parser: Callable[..., Any]) -> list[Case]:
    raise NotImplementedError("the slot parser's inputs are not written yet")


def execute_cases(parser: Callable[..., Any]) -> list[Case]:
    raise NotImplementedError("the execute parser's inputs are not written yet")
