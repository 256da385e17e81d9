"""What answering `toolwire review` questions does to the next run (issue 28 item 2).

``python -m bench.review_effect [CORPUS ...] [--answer N ...] [--wrong F]``

For each corpus (``bench.vault_accuracy``'s: a flat vault, labels hidden) a librarian
run is made as a user would: ``specs/librarian.yaml`` with the corpus's topics, the
scorer deciding, the model replayed (titles off: this measures topics only). A
simulated user then answers the first N open questions of that run with the true
label, through ``librarian.review_answers.apply_answer`` (the store, the journal, a run per
answer: the code path of ``toolwire review --answer``), and a second run is made.

Printed per corpus and N: the first run's questions; on the notes the user did *not*
answer, how many end with the right topic after run 1 and after run 2 (do the answers,
as examples, help the others?); the right topics the second run breaks (must be 0);
and how many questions the second run asks. With ``--wrong F`` the wrongly tagged
notes are kept by the run (it never replaces a user's topic) and flagged *misfiled*:
answered, they are fixed ("wrong tags fixed" below). ``TOOLWIRE_BENCH_EMBED_CACHE``
serves embeddings from ``bench.vault_accuracy``'s on-disk cache.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from bench.vault_accuracy import CORPORA, Vault, _CachedEmbedder, _spec, build_vault

__all__ = ["main", "measure_review"]

_EMPTY = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>-</summary>\n<operations>\n</operations>\n<warnings></warnings>\n"
    "</librarian_response>"
)


def _replay_spec(scratch: Path, topics: dict[str, str], notes: int) -> Path:
    """The shipped spec with this taxonomy, the model replayed and titles off."""
    spec = _spec(scratch / "spec.yaml", topics)
    doc = yaml.safe_load(spec.read_text(encoding="utf-8"))
    script = scratch / "script.jsonl"
    script.write_text((json.dumps({"text": _EMPTY}) + "\n") * (notes + 1), encoding="utf-8")
    doc["model"]["name"] = f"replay:{script}"
    doc["judgement"]["write_titles"] = False
    doc["constraints"]["batch_size"] = notes + 1
    doc["constraints"]["max_operations"] = notes + 1
    doc["constraints"]["context_window_tokens"] = 10_000_000
    doc["constraints"]["allowed_kinds"] = ["retag_note", "defer"]
    doc.setdefault("memory", {})["synthesis"] = "off"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return spec


def _run(spec: Path, vault: Vault, db: Path) -> dict[str, str | None]:
    """One librarian run; each note's topic as the run leaves it (None: deferred)."""
    from toolwire.librarian.job import prepare_run, run_librarian

    ctx = prepare_run(spec, workspace=vault.root, db=db)
    result = run_librarian(ctx)
    if not result.ok:
        raise SystemExit(f"run failed: {result.error_code}: {result.error_message}")
    return {n: j.topic for n, j in ctx.judgements.items()}


def _bench_cache() -> None:
    """Runs embed through ``TOOLWIRE_BENCH_EMBED_CACHE`` when it is set (re-runs are free)."""
    from toolwire.librarian.judge import scorer as judge

    cache = os.environ.get("TOOLWIRE_BENCH_EMBED_CACHE")
    inner_load = judge.load_embedder
    if not cache or getattr(inner_load, "bench_cached", False):
        return

    def cached(name: str) -> object:
        inner = inner_load(name)
        return None if inner is None else _CachedEmbedder(inner, Path(cache))

    cached.bench_cached = True  # type: ignore[attr-defined]
    judge.load_embedder = cached  # type: ignore[assignment]


def measure_review(name: str, answer: int, wrong: float) -> dict[str, object]:
    from toolwire.librarian.review import load_round
    from toolwire.librarian.review_answers import Answer, apply_answer
    from toolwire.store import Store

    _bench_cache()

    topics = CORPORA[name]
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        scratch = Path(tmp)
        vault = build_vault(name, scratch / "vault", wrong=wrong)
        spec = _replay_spec(scratch, topics, len(vault.labels))
        db = scratch / "s.duckdb"
        first = _run(spec, vault, db)
        store = Store(db)
        review = load_round(store, vault.root)
        asked = review.open
        ws = review.load_workspace()
        answered: set[str] = set()
        for q in asked[:answer]:
            truth = vault.labels[q.note_id]
            apply_answer(store, review, q, Answer("topic", truth), user_id="bench",
                         source="bench", workspace=ws)  # fmt: skip
            answered.add(q.note_id)
            ws = review.load_workspace()
        second = _run(spec, vault, db)
        again = load_round(store, vault.root).open
        others = [n for n in vault.labels if n not in answered]
        wrong_tags = [n for n, t in vault.tagged.items() if t != vault.labels[n]]
        return {
            "corpus": name,
            "wrong_share": wrong,
            "notes": len(vault.labels),
            "questions_run1": len(asked),
            "answered": len(answered),
            "right_others_run1": sum(first[n] == vault.labels[n] for n in others),
            "right_others_run2": sum(second[n] == vault.labels[n] for n in others),
            "others": len(others),
            "broken_run2": sum(
                first[n] == vault.labels[n] and second[n] != vault.labels[n] for n in others
            ),
            "answers_right_run2": sum(second[n] == vault.labels[n] for n in answered),
            "questions_run2": len(again),
            "misfiled_asked": sum(q.kind == "misfiled" for q in asked),
            "wrong_tags": len(wrong_tags),
            "wrong_fixed_run1": sum(first[n] == vault.labels[n] for n in wrong_tags),
            "wrong_fixed_run2": sum(second[n] == vault.labels[n] for n in wrong_tags),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review_effect")
    parser.add_argument("corpora", nargs="*", default=["runbooks"], choices=list(CORPORA))
    parser.add_argument("--answer", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--wrong", type=float, default=0.0)
    args = parser.parse_args(argv)
    print(
        "| corpus | wrong tags | questions | answered | others right run 1 -> run 2 "
        "| broken | answers kept | questions next run | wrong tags asked | wrong tags fixed "
        "run 1 -> 2 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.corpora:
        for n in args.answer:
            r = measure_review(name, n, args.wrong)
            print(
                f"| {r['corpus']} | {r['wrong_share']:.0%} | {r['questions_run1']} | "
                f"{r['answered']} | {r['right_others_run1']} -> {r['right_others_run2']} "
                f"of {r['others']} | {r['broken_run2']} | {r['answers_right_run2']} of "
                f"{r['answered']} | {r['questions_run2']} | {r['misfiled_asked']} | "
                f"{r['wrong_fixed_run1']} -> {r['wrong_fixed_run2']} of {r['wrong_tags']} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
