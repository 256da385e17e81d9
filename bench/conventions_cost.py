"""What reading a vault's conventions costs (issue 42): ``Workspace.load`` reads them
from every note once; this prints the load time and the share detection takes.

    python -m bench.conventions_cost [COUNT]

On a synthetic vault of COUNT notes (``bench.scale_vault``, default 2,000) and on
``data/notes``: median of 3 loads, and of 3 detections over the loaded notes.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.fixtures import NOTES_DIR
from bench.scale_vault import build_vault
from toolwire.librarian.notes.conventions import detect_conventions
from toolwire.librarian.notes.workspace import Workspace, note_sample


def _median_s(fn: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(root: Path, label: str) -> None:
    ws = Workspace.load(root)
    notes = list(ws.notes.values())
    load = _median_s(lambda: Workspace.load(root))
    detect = _median_s(lambda: detect_conventions(map(note_sample, notes)))
    print(
        f"{label}: {len(notes)} notes, load {load:.3f} s, conventions {detect:.3f} s "
        f"({100 * detect / load:.1f} % of the load); {ws.conventions}"
    )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    measure(NOTES_DIR, "data/notes")
    with tempfile.TemporaryDirectory() as tmp:
        measure(build_vault(Path(tmp) / "vault", count), f"synthetic {count}")


if __name__ == "__main__":
    main()
