"""Timing and result types shared by every figure.

Machines are noisy (this one is shared with other engineers' test runs), so a
figure never compares two numbers taken minutes apart: ``interleave`` runs the
measured case and its baseline in alternating batches in the same process and
keeps the median per-call time of each. Targets are checked here, in one
place, so every table says "met / missed by how much" the same way.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Figure",
    "Row",
    "Target",
    "Timing",
    "calibrate",
    "interleave",
    "interleave_setup",
    "median_of",
    "ratio",
]


@dataclass(frozen=True)
class Timing:
    """Per-call seconds: the median over batches, and every batch's value."""

    median_s: float
    samples_s: tuple[float, ...]
    calls_per_batch: int

    @property
    def spread(self) -> float:
        """(max - min) / median over the batches: how noisy the measurement was."""
        if not self.samples_s or self.median_s <= 0:
            return 0.0
        return (max(self.samples_s) - min(self.samples_s)) / self.median_s


def calibrate(fn: Callable[[], Any], *, batch_s: float, max_calls: int = 1_000_000) -> int:
    """How many calls of ``fn`` fill about ``batch_s`` seconds (at least one)."""
    fn()  # warm caches, compile regexes, import lazily imported modules
    n = 1
    while n < max_calls:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        spent = time.perf_counter() - start
        if spent >= batch_s / 4:
            return max(1, min(max_calls, math.ceil(n * batch_s / max(spent, 1e-9))))
        n *= 4
    return max_calls


def interleave(
    cases: dict[str, Callable[[], Any]],
    *,
    repeats: int,
    batch_s: float = 0.1,
    number: int | None = None,
) -> dict[str, Timing]:
    """Median per-call time of each case, batches alternating between the cases.

    Every case gets the same number of calls per batch (the count the slowest
    one needs to fill ``batch_s``) unless ``number`` fixes it; the order of
    the cases flips on every repeat so a drift in machine load hits all alike.
    """
    if number is None:
        number = min(calibrate(fn, batch_s=batch_s) for fn in cases.values())
    samples: dict[str, list[float]] = {name: [] for name in cases}
    items = list(cases.items())
    for r in range(repeats):
        gc.collect()
        for name, fn in items if r % 2 == 0 else reversed(items):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - start) / number)
    return {
        name: Timing(statistics.median(values), tuple(values), number)
        for name, values in samples.items()
    }


def interleave_setup(
    cases: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]],
    *,
    repeats: int,
    warmup: bool = True,
) -> dict[str, Timing]:
    """Like ``interleave`` for cases that need fresh state per call: each case is
    ``(setup, fn)``; ``setup()`` runs untimed and its result is passed to ``fn``."""
    if warmup:
        for setup, fn in cases.values():
            fn(setup())
    samples: dict[str, list[float]] = {name: [] for name in cases}
    items = list(cases.items())
    for r in range(repeats):
        for name, (setup, fn) in items if r % 2 == 0 else reversed(items):
            state = setup()
            gc.collect()
            start = time.perf_counter()
            fn(state)
            samples[name].append(time.perf_counter() - start)
    return {
        name: Timing(statistics.median(values), tuple(values), 1)
        for name, values in samples.items()
    }


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0 or math.isnan(baseline):
        return None
    return value / baseline


@dataclass(frozen=True)
class Target:
    """A goal on a row's ``value`` or ``ratio``: ``op`` is one of >=, >, <=, <."""

    on: str  # "value" | "ratio"
    op: str
    threshold: float
    text: str

    def check(self, row: Row) -> tuple[bool | None, str]:
        """(met, how far off) for ``row``; None when the row has no number to check."""
        got = row.value if self.on == "value" else row.ratio
        if got is None or (isinstance(got, float) and math.isnan(got)):
            return None, "not measured"
        met = {
            ">=": got >= self.threshold,
            ">": got > self.threshold,
            "<=": got <= self.threshold,
            "<": got < self.threshold,
        }[self.op]
        if met:
            return True, ""
        if self.threshold == 0:
            return False, f"{got:g} vs {self.text}"
        off = got / self.threshold
        if self.op in ("<", "<="):
            return False, f"{off:.2f}x the limit ({got:.4g} vs {self.text})"
        return False, f"{off:.2f}x of the goal ({got:.4g} vs {self.text})"


@dataclass
class Row:
    """One line of a figure's table. ``value``/``baseline`` are in ``unit``."""

    measure: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_label: str = ""
    ratio: float | None = None
    ratio_label: str = ""
    target: Target | None = None
    why: str = ""  # what explains a miss (or the number), written by the figure
    met: bool | None = None
    miss: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None and self.value is not None and self.baseline is not None:
            self.ratio = ratio(self.value, self.baseline)
        if self.target is not None:
            self.met, self.miss = self.target.check(self)


@dataclass
class Figure:
    """One figure of the issue: its rows, how it was measured, and what it found."""

    key: str
    number: int
    title: str
    method: str = ""
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    proposals: list[str] = field(default_factory=list)
    status: str = "measured"  # measured | partial | skipped | error
    seconds: float = 0.0
    # Wall-time budget for model-bound figures (--model-budget-min); None = no limit.
    # A figure that stops early says how much it measured and marks itself partial.
    budget_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        """A figure as ``results.json`` stored it (targets re-checked on load)."""
        rows = []
        for raw in data.get("rows", []):
            fields = {k: v for k, v in raw.items() if k not in ("met", "miss", "target")}
            target = raw.get("target")
            rows.append(Row(**fields, target=Target(**target) if target else None))
        rest = {k: v for k, v in data.items() if k != "rows"}
        return cls(**rest, rows=rows)

    def over_budget(self, started: float) -> bool:
        """True once ``budget_s`` has passed since ``started`` (a perf_counter value)."""
        return self.budget_s is not None and time.perf_counter() - started >= self.budget_s

    @property
    def missed(self) -> list[Row]:
        return [row for row in self.rows if row.met is False]
