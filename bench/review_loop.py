"""The review loop as a user meets it (issue 41): run, answer the first questions, run again.

``python -m bench.review_loop [CORPUS ...] [--tagged N] [--rounds R] [--share 0.05]``

For each corpus (``bench.vault_accuracy``'s flat vault, labels hidden; ``--tagged N``
notes per topic tagged by the user first) a librarian run is made with the shipped spec
(the scorer deciding, the model replayed, titles off). Then, each round, a simulated user
answers the open questions of the latest run *in the order the tool asks them* (its
``seq``), ``--share`` of the notes per round, with the true label, through
``librarian.review.apply_answer`` (the code path of ``toolwire review --answer``), and
the librarian runs again. Printed per round:

- answered: questions answered so far;
- applied: notes the librarian itself gave a topic (any run so far), and how many of
  them are right (precision: must stay >= 95 %);
- coverage: notes that end with a topic (applied or answered), of those not tagged at
  the start;
- per answer: notes decided per answer this round (the new applied ones plus the
  answers, over the answers) against what the tool said it expected
  (``toolwire review``'s "an answer is expected to decide ~N notes").

``TOOLWIRE_BENCH_EMBED_CACHE`` serves embeddings from ``bench.vault_accuracy``'s cache.
"""

from __future__ import annotations

import argparse
import math
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.review_effect import _bench_cache, _replay_spec, _run
from bench.vault_accuracy import CORPORA, build_vault, folder_corpus

__all__ = ["Round", "main", "review_loop"]

_EXPECTED = re.compile(r"expected to decide ~(\d+)")


@dataclass
class Round:
    answered: int
    applied: int
    applied_right: int
    covered: int
    free: int
    decided_per_answer: float
    expected_per_answer: float

    @property
    def precision(self) -> float:
        return 100.0 * self.applied_right / self.applied if self.applied else float("nan")

    @property
    def coverage(self) -> float:
        return 100.0 * self.covered / self.free if self.free else float("nan")


def review_loop(name: str, tagged: int, rounds: int, share: float) -> list[Round]:
    from toolwire.librarian.review import load_round
    from toolwire.librarian.review_answers import Answer, apply_answer
    from toolwire.store import Store

    _bench_cache()
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        scratch = Path(tmp)
        vault = build_vault(name, scratch / "vault", tagged_per_topic=tagged)
        spec = _replay_spec(scratch, CORPORA[name], len(vault.labels))
        db = scratch / "s.duckdb"
        free = [n for n in vault.labels if n not in vault.tagged]
        per_round = max(1, math.ceil(share * len(vault.labels)))
        applied: dict[str, str] = {}  # note -> the topic a librarian run gave it
        answered: set[str] = set()
        out: list[Round] = []
        expected = 0.0
        for r in range(rounds + 1):
            ends = _run(spec, vault, db)
            before = len(applied)
            for n, topic in ends.items():
                if topic and n not in answered and n not in vault.tagged and n not in applied:
                    applied[n] = topic
            new_answers = len(answered) - (out[-1].answered if out else 0)
            decided = (len(applied) - before + new_answers) / new_answers if new_answers else 0
            out.append(
                Round(
                    answered=len(answered),
                    applied=len(applied),
                    applied_right=sum(vault.labels[n] == t for n, t in applied.items()),
                    # A misfiled question can be about a note tagged at the start.
                    covered=len(applied) + len(answered - set(vault.tagged)),
                    free=len(free),
                    decided_per_answer=decided,
                    expected_per_answer=expected,
                )
            )
            if r == rounds:
                break
            store = Store(db)
            review = load_round(store, vault.root)
            ws = review.load_workspace()
            asked = review.open[:per_round]
            hints = [_EXPECTED.search(q.why) for q in asked]
            expected = sum(int(h.group(1)) if h else 1 for h in hints) / max(len(asked), 1)
            for q in asked:
                apply_answer(store, review, q, Answer("topic", vault.labels[q.note_id]),
                             user_id="bench", source="bench", workspace=ws)  # fmt: skip
                answered.add(q.note_id)
                ws = review.load_workspace()
        return out


def curve_table(name: str, tagged: int, rounds: list[Round]) -> str:
    lines = [
        f"{name}, {'nothing tagged' if not tagged else f'{tagged} per topic tagged'} "
        f"({rounds[0].free} notes not tagged)",
        "",
        "| round | answered | applied by the tool | right | coverage | decided per answer "
        "(expected) |",
        "|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rounds):
        per = f"{r.decided_per_answer:.1f} ({r.expected_per_answer:.1f})" if i else "—"
        lines.append(
            f"| {i} | {r.answered} ({100 * r.answered / r.free:.0f} %) | {r.applied} | "
            f"{r.precision:.1f} % | {r.coverage:.1f} % | {per} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review_loop")
    parser.add_argument("corpora", nargs="*", default=["til-heldout", "hf-course", "rbe"])
    parser.add_argument("--tagged", type=int, nargs="+", default=[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--share", type=float, default=0.05)
    args = parser.parse_args(argv)
    for name in args.corpora:
        if name not in CORPORA:
            name = folder_corpus(name)
        for tagged in args.tagged:
            started = time.process_time()
            rounds = review_loop(name, tagged, args.rounds, args.share)
            print(curve_table(name, tagged, rounds))
            print(f"\n({time.process_time() - started:.0f} CPU-s)\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
