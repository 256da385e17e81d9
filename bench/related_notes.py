"""Related notes (issue 44): recall@5 of held-back links, toolwire's ranking (embeddings
plus links and topics, ``librarian.reorganize.related``) against plain cosine
similarity of the same embeddings.

``python -m bench.related_notes [--share 0.2] [--seeds 5] [--embedder e5-small|none]``

The vault: Rust by Example's pages (``bench/corpora/rbe-src``, MIT, its ``src/`` with
the table of contents left out), read by the librarian's own reader; its links are the
authors' (relative markdown links and reference definitions). For each seed a share of
the links (source -> target pairs) is held back: removed from the link graph both
rankings see. A held-back link counts as found when its target is among the source's
top 5 suggestions (notes the source still links to are never suggested, by either).
Topics are the chapters (the folder under ``src/``), as a taxonomy would tag them;
the run without topics is reported too. Embeddings are cached as in bench.duplicates.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from bench.duplicates import cached_embedder
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.reorganize.plan import note_vectors
from toolwire.librarian.reorganize.related import rank_related

CORPUS = Path(__file__).resolve().parent / "corpora" / "rbe-src"


def _recall(ranked: list[list[tuple[int, float]]], held: list[tuple[int, int]]) -> float:
    found = sum(j in {x for x, _ in ranked[i]} for i, j in held)
    return found / len(held) if held else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=float, default=0.2, help="links held back")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--embedder", default="e5-small", choices=["e5-small", "none"])
    args = parser.parse_args()

    ws = Workspace.load(CORPUS)
    notes = sorted(ws.notes.values(), key=lambda n: n.path)
    index = {n.note_id: i for i, n in enumerate(notes)}
    links = [
        {index[t] for target in n.links if (t := ws.resolve_link(n, target)) in index} - {i}
        for i, n in enumerate(notes)
    ]
    pairs = [(i, j) for i, targets in enumerate(links) for j in sorted(targets)]
    topics = [n.path.split("/", 1)[0] if "/" in n.path else None for n in notes]
    start = time.perf_counter()
    vectors = note_vectors(cached_embedder(args.embedder), notes)
    embed_s = time.perf_counter() - start
    print(f"vault: {len(notes)} notes, {len(pairs)} links between them; embedded in "
          f"{embed_s:.1f} s ({args.embedder}); {args.share:.0%} of the links held back, "
          f"{args.seeds} seeds")  # fmt: skip
    rows: dict[str, list[float]] = {"plain cosine": [], "toolwire": [], "toolwire, no topics": []}
    rank_s = 0.0
    for seed in range(args.seeds):
        held = random.Random(seed).sample(pairs, round(len(pairs) * args.share))
        kept = [set(t) for t in links]
        for i, j in held:
            kept[i].discard(j)
        start = time.perf_counter()
        ours = rank_related(vectors, kept, topics, k=5, min_score=-1.0)
        rank_s += time.perf_counter() - start
        rows["toolwire"].append(_recall(ours, held))
        bare = rank_related(vectors, kept, [None] * len(notes), k=5, min_score=-1.0)
        rows["toolwire, no topics"].append(_recall(bare, held))
        plain = rank_related(vectors, kept, topics, k=5, min_score=-1.0, evidence=False)
        rows["plain cosine"].append(_recall(plain, held))
    print("| ranking | recall@5 (mean over seeds) | min | max |")
    print("|---|---|---|---|")
    for name, values in rows.items():
        v = np.array(values)
        print(f"| {name} | {v.mean():.1%} | {v.min():.1%} | {v.max():.1%} |")
    print(f"ranking all {len(notes)} notes: {rank_s / args.seeds * 1000:.0f} ms per pass")


if __name__ == "__main__":
    main()
