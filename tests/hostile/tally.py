"""The tier's figures: what was tried, what was injected, what was lost.

Tests add to one session-wide tally (``tally`` fixture); the terminal summary
prints it and ``--hostile-report PATH`` writes it as Markdown (plus a JSON file
next to it), which is how ``bench/HOSTILE.md`` is produced. "rows lost" must
stay 0: a test that finds a loss fails, and still records the number first.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path

__all__ = ["TALLY", "Tally"]


class Tally:
    """Counters keyed by (area, measure); thread-safe, additive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], float] = defaultdict(float)
        self._notes: dict[str, list[str]] = defaultdict(list)

    def add(self, area: str, measure: str, amount: float = 1) -> None:
        """Add ``amount`` to ``measure`` in ``area`` (e.g. "fuzz: xml_attrless", "inputs tried")."""
        with self._lock:
            self._counts[(area, measure)] += amount

    def note(self, area: str, text: str) -> None:
        """A line of context for ``area`` (a timing, a peak memory figure)."""
        with self._lock:
            self._notes[area].append(text)

    def rows(self) -> list[tuple[str, str, float]]:
        with self._lock:
            return [(a, m, v) for (a, m), v in sorted(self._counts.items())]

    def total(self, measure: str) -> float:
        with self._lock:
            return sum(v for (_, m), v in self._counts.items() if m == measure)

    def markdown(self, scale: str, outcome: str) -> str:
        lines = [
            "# toolwire hostile tier: figures",
            "",
            f"Written by `scripts/hostile` (scale: {scale}; pytest outcome: {outcome}). "
            "Every row is counted by the tests in `tests/hostile/` as they run; "
            "`rows lost` is asserted to be 0 wherever it is counted.",
            "",
            "| area | measure | count |",
            "|---|---|---|",
        ]
        for area, measure, value in self.rows():
            shown = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
            lines.append(f"| {area} | {measure} | {shown} |")
        lines += ["", "## Totals", ""]
        for measure in ("inputs tried", "faults injected", "runs under load", "rows lost"):
            lines.append(f"- {measure}: {self.total(measure):,.0f}")
        with self._lock:
            notes = {k: list(v) for k, v in sorted(self._notes.items())}
        if notes:
            lines += ["", "## Notes", ""]
            for area, texts in notes.items():
                lines += [f"- {area}: {t}" for t in texts]
        return "\n".join(lines) + "\n"

    def write(self, path: Path, scale: str, outcome: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown(scale, outcome), encoding="utf-8")
        payload = {
            "scale": scale,
            "outcome": outcome,
            "rows": [{"area": a, "measure": m, "count": v} for a, m, v in self.rows()],
            "notes": self._notes,
        }
        path.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", "utf-8")


TALLY = Tally()
