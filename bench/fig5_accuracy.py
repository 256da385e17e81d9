"""Figure 5: topic accuracy on 108 real incident runbooks nobody here wrote.

The corpus (``../shared/corpora/runbooks``) is copied to a scratch workspace;
the librarian runs once over it (goal "organize incident runbooks by
subsystem", the eight subsystems as taxonomy, retag only, one note per
request, grammar on where the provider takes one). Accuracy compares the
topic each note carries *after the run* (front matter ``topic``) with
``labels.csv``; a note the run did not retag counts as wrong. The baseline,
in the same run on the same notes: the subsystem whose name occurs most often
in the note (ties to the first in taxonomy order).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.fixtures import (
    RUNBOOK_SUBSYSTEMS,
    TimedProvider,
    copy_notes,
    keyword_guess,
    load_runbook_labels,
    runbooks_dir,
    shipped_min_confidence,
    write_spec,
)
from bench.harness import Figure, Row, Target
from bench.local_model import LocalModel, endpoint_model, local_model

__all__ = ["run", "pick_notes"]

GOAL = "organize incident runbooks by subsystem"
BEATS_BASELINE = Target("ratio", ">=", 1.0, ">= keyword baseline (STACK.md)")
FIRST_TRY = Target("value", ">=", 100.0, "100 % (with grammar)")


def pick_notes(labels: dict[str, str], per_subsystem: int | None) -> list[str]:
    """Every note, or the first ``per_subsystem`` of each subsystem (labels.csv order)."""
    if per_subsystem is None:
        return list(labels)
    taken: Counter[str] = Counter()
    chosen = []
    for note_id, subsystem in labels.items():
        if taken[subsystem] < per_subsystem:
            taken[subsystem] += 1
            chosen.append(note_id)
    return chosen


def _applied_topics(ws: Path) -> dict[str, str | None]:
    from toolwire.librarian.workspace import Workspace

    return {note.note_id: note.topic for note in Workspace.load(ws).notes.values()}


def _run_model(
    root: Path, name: str, model: LocalModel, corpus: Path, notes: list[str]
) -> dict[str, Any]:
    from toolwire.librarian.job import prepare_run, run_librarian

    ws = copy_notes(corpus / "notes", root / f"ws-{name}", [f"{n}.md" for n in notes])
    spec = write_spec(
        root / f"spec-{name}.yaml",
        name=f"bench-runbooks-{name}",
        model=model.block,
        topics=RUNBOOK_SUBSYSTEMS,
        goal=GOAL,
        allowed_kinds=("retag_note",),
        max_operations=1,
        constrain="grammar",
    )
    started = time.perf_counter()
    ctx = prepare_run(spec, workspace=ws, db=root / f"store-{name}.duckdb")
    timed = ctx.provider = TimedProvider(ctx.provider)
    prepared = time.perf_counter()
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    ended = time.perf_counter()
    applied = _applied_topics(ws)
    proposed: dict[str, str] = {}
    for outcome in result.outcomes:
        op = outcome.operation
        if op.kind == "retag_note" and op.target_note_id:
            proposed[op.target_note_id] = op.body_markdown.split("\n")[0].strip()
    initial = [a for a in result.attempts if a.kind == "initial"]
    return {
        "runs": 1,
        "status": [result.status],
        "error_code": [result.error_code] if result.error_code else [],
        "turns": result.turns,
        "notes": len(notes),
        "applied": applied,
        "proposed": proposed,
        "attempts": len(result.attempts),
        "initial": len(initial),
        "initial_ok": sum(a.parse_ok for a in initial),
        "repairs": sum(1 for a in result.attempts if a.kind == "repair"),
        "run_s": ended - prepared,
        "model_calls": timed.calls,
        "after_turns_model_s": timed.seconds - sum(a.latency_ms for a in result.attempts) / 1000,
        "prepare_s": prepared - started,
        "grammar": bool(ctx.provider.supports_grammar),
        "statuses": Counter(o.status for o in result.outcomes),
        "codes": Counter(o.code for o in result.outcomes if o.code),
    }


def _merge(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """Sum two chunk results (dicts of topics are united, counters and lists added)."""
    if total is None:
        return dict(part)
    out = dict(total)
    for key, value in part.items():
        if key == "grammar":
            out[key] = total[key] and value
        elif isinstance(value, dict) and not isinstance(value, Counter):
            out[key] = {**total[key], **value}
        else:
            out[key] = total[key] + value
    return out


def _stratified(labels: dict[str, str], notes: list[str]) -> list[str]:
    """Notes in round-robin order over subsystems, so any prefix or chunk is mixed."""
    queues: dict[str, list[str]] = {s: [] for s in RUNBOOK_SUBSYSTEMS}
    for n in notes:
        queues[labels[n]].append(n)
    out: list[str] = []
    while any(queues.values()):
        for subsystem in RUNBOOK_SUBSYSTEMS:
            if queues[subsystem]:
                out.append(queues[subsystem].pop(0))
    return out


def _run_chunks(
    fig: Figure,
    root: Path,
    name: str,
    model: LocalModel,
    corpus: Path,
    notes: list[str],
    chunk: int,
) -> tuple[dict[str, Any] | None, list[str]]:
    """One librarian run per chunk of notes until done or over budget; (merged, notes run)."""
    started = time.perf_counter()
    total: dict[str, Any] | None = None
    done: list[str] = []
    for c in range(0, len(notes), chunk):
        if done and fig.over_budget(started):
            fig.status = "partial"
            fig.notes.append(
                f"{name}: stopped after {len(done)} of {len(notes)} notes: the "
                f"--model-budget-min budget ({(fig.budget_s or 0) / 60:.0f} min) was spent "
                f"(load average {os.getloadavg()[0]:.1f} on 2 cores)."
            )
            break
        part = notes[c : c + chunk]
        total = _merge(total, _run_model(root, f"{name}-{c // chunk}", model, corpus, part))
        done += part
        print(f"    ... {name}: {len(done)}/{len(notes)} notes", flush=True)
    return total, done


def _accuracy(guesses: Mapping[str, str | None], labels: dict[str, str], notes: list[str]) -> float:
    return 100.0 * sum(guesses.get(n) == labels[n] for n in notes) / max(1, len(notes))


def _per_subsystem(guesses: dict[str, Any], labels: dict[str, str], notes: list[str]) -> str:
    right: Counter[str] = Counter()
    total: Counter[str] = Counter(labels[n] for n in notes)
    for n in notes:
        right[labels[n]] += guesses.get(n) == labels[n]
    return ", ".join(f"{s} {right[s]}/{total[s]}" for s in RUNBOOK_SUBSYSTEMS if total[s])


def run(fig: Figure, *, quick: bool) -> None:
    corpus = runbooks_dir()
    if not (corpus / "labels.csv").is_file():
        fig.status = "skipped"
        fig.notes.append(f"corpus not found at {corpus} (set TOOLWIRE_BENCH_RUNBOOKS)")
        return
    labels = load_runbook_labels(corpus)
    notes = _stratified(labels, pick_notes(labels, 3 if quick else None))
    chunk = len(notes) if quick else 27
    texts = {n: (corpus / "notes" / f"{n}.md").read_text(encoding="utf-8") for n in notes}
    start = time.perf_counter()
    keyword = {n: keyword_guess(texts[n], RUNBOOK_SUBSYSTEMS) for n in notes}
    keyword_s = (time.perf_counter() - start) / len(notes)
    fig.method = (
        f"{len(notes)} runbooks"
        + (" (3 per subsystem, --quick)" if quick else "")
        + f"; goal {GOAL!r}; taxonomy {', '.join(RUNBOOK_SUBSYSTEMS)}; allowed kinds "
        f"retag_note, max_operations 1, min_confidence {shipped_min_confidence()} "
        "(as shipped), one note per "
        "request, context window 2048 tokens (long notes truncated), temperature 0, "
        f"max_tokens 256. Notes in round-robin subsystem order, one librarian run per "
        f"{chunk} notes (prepare_run untimed, run_librarian timed); accuracy counts the "
        "front-matter topic after the run, a note left untagged counts as wrong. The "
        "keyword baseline is scored on exactly the notes each model was run on."
    )
    base_all = _accuracy(keyword, labels, notes)
    fig.notes.append(
        f"Keyword baseline on all {len(notes)} notes: {base_all:.1f} % "
        f"({_per_subsystem(keyword, labels, notes)}); {keyword_s * 1e6:.0f} us/note."
    )
    models: list[tuple[str, LocalModel | None]] = [("bundled", None)]
    endpoint = endpoint_model()
    if endpoint is None:
        fig.notes.append(
            "OpenAI-compatible endpoint: not measured (set TOOLWIRE_OPENAI_BASE_URL and "
            "TOOLWIRE_BENCH_OPENAI_MODEL, optionally TOOLWIRE_BENCH_OPENAI_SERVER)."
        )
    else:
        models.append(("endpoint", endpoint))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-runbooks-") as tmp:
        root = Path(tmp)
        for name, model in models:
            try:
                if model is None:
                    with local_model() as lm:
                        out, done = _run_chunks(fig, root, name, lm, corpus, notes, chunk)
                        label = lm.label
                else:
                    out, done = _run_chunks(fig, root, name, model, corpus, notes, chunk)
                    label = model.label
            except Exception as exc:  # an endpoint that is down must not lose the rest
                fig.status = "partial"
                fig.notes.append(f"{name}: not measured: {type(exc).__name__}: {exc}")
                continue
            if out is None:
                continue
            out.update(label=label, done=done, keyword=_accuracy(keyword, labels, done))
            results[name] = out
            _rows(fig, name, out, labels, done)
    fig.extra["models"] = {
        k: {kk: vv for kk, vv in v.items() if kk not in ("applied", "proposed", "done")}
        for k, v in results.items()
    }
    fig.extra["keyword_accuracy_pct_all_notes"] = base_all
    if "bundled" in results:
        b = results["bundled"]
        acc = _accuracy(b["applied"], labels, b["done"])
        prop = _accuracy(b["proposed"], labels, b["done"])
        fig.extra["headline"] = (
            f"SmolLM2 {acc:.1f} % applied"
            + (f" ({prop:.1f} % proposed)" if abs(prop - acc) > 1e-9 else "")
            + f" vs keyword baseline {b['keyword']:.1f} % on {len(b['done'])} notes, "
            f"{b['run_s'] / len(b['done']):.1f} s/note"
        )
        deferred = b["codes"].get("LOW_CONFIDENCE", 0)
        if deferred:
            fig.proposals.append(
                f"{deferred} of {len(b['done'])} retags were deferred as LOW_CONFIDENCE "
                f"(min_confidence {shipped_min_confidence()}, as in specs/librarian.yaml), "
                f"so the proposed-topic accuracy ({prop:.1f} %) never reaches the notes: the "
                "135M model's confidence is not calibrated (the grammar lets it write 0.0x, "
                "and the prompt's shape shows 0.0_TO_1.0). Either stop gating a small model "
                "on its self-reported confidence (min_confidence 0 in the shipped spec), or "
                "take the confidence from the sampler (the probability of the chosen topic "
                "token) instead of asking the model to write one."
            )
    if any(r.met is False and r.target is BEATS_BASELINE for r in fig.rows):
        fig.proposals.append(
            "The model's topics do not beat counting subsystem names. Give it the evidence "
            "the baseline uses: the request could carry the note's title and first heading "
            "(runbook names are alert names such as KubePodCrashLooping), or the keyword "
            "guess could pre-fill the answer and the model only confirm or change it; keep "
            "the keyword baseline in this figure as the bar."
        )


def _rows(
    fig: Figure, name: str, out: dict[str, Any], labels: dict[str, str], notes: list[str]
) -> None:
    acc = _accuracy(out["applied"], labels, notes)
    prop = _accuracy(out["proposed"], labels, notes)
    who = f"{name} ({out['label']}, {len(notes)} notes, {out['runs']} runs)"
    grammar = "grammar" if out["grammar"] else "no grammar"
    status = ", ".join(f"{k} {v}" for k, v in Counter(out["status"]).items())
    fig.add(
        Row(
            f"{who}: topic accuracy, applied topics ({grammar})",
            acc,
            "%",
            baseline=out["keyword"],
            baseline_label="keyword count, same notes",
            ratio_label="x keyword",
            target=BEATS_BASELINE,
            why=(
                f"per subsystem {_per_subsystem(out['applied'], labels, notes)}; runs {status}"
                + (f" ({', '.join(out['error_code'])})" if out["error_code"] else "")
                + f"; outcomes {dict(out['statuses'])}"
                + (f", codes {dict(out['codes'])}" if out["codes"] else "")
            ),
        )
    )
    fig.add(
        Row(
            f"{name}: accuracy of the topics proposed (validated, applied or not)",
            prop,
            "%",
            baseline=out["keyword"],
            baseline_label="keyword count, same notes",
            ratio_label="x keyword",
            why=f"per subsystem {_per_subsystem(out['proposed'], labels, notes)}",
        )
    )
    fig.add(
        Row(
            f"{name}: first-try valid",
            100.0 * out["initial_ok"] / max(1, out["initial"]),
            "%",
            target=FIRST_TRY if out["grammar"] else None,
            why=f"{out['repairs']} repairs in {out['turns']} turns",
        )
    )
    fig.add(
        Row(
            f"{name}: seconds per note (run_librarian wall / notes)",
            out["run_s"] / max(1, len(notes)),
            "s/note",
            why=(
                "includes the profile synthesis each run does after its turns: "
                f"{out['model_calls'] - out['attempts']} model calls, "
                f"{out['after_turns_model_s']:.1f} s in all"
            ),
        )
    )
