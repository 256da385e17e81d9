"""Figure 5: topic accuracy on 108 real incident runbooks nobody here wrote.

The corpus (``../shared/corpora/runbooks``) is copied to a scratch workspace and
the *shipped* librarian spec runs over it once, as a user would run it on their
own notes: same judgement block, constraints, min_confidence and model; only the
taxonomy (the eight subsystems, with one-line descriptions written once for this
figure) and the goal change. Measured against ``labels.csv``:

- top choice: the scorer's best topic for every note (what the librarian believes);
- applied: of the retags the run applied, how many are right (what reaches the notes);
- after the run: notes whose topic is right (a deferred note counts as wrong);
- calibration: per confidence bin, how many top choices are right.

The baseline, in the same run on the same notes: the subsystem whose name occurs
most often in the note (ties to the first in taxonomy order).
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.fixtures import (
    REPO,
    RUNBOOK_SUBSYSTEMS,
    TimedProvider,
    copy_notes,
    keyword_guess,
    load_runbook_labels,
    runbooks_dir,
)
from bench.harness import Figure, Row, Target
from bench.local_model import LocalModel, endpoint_model, local_model

__all__ = ["DESCRIPTIONS", "run", "pick_notes"]

GOAL = "organize incident runbooks by subsystem"
SPEC = REPO / "specs" / "librarian.yaml"
# One line per subsystem: what a person new to these runbooks would write from the
# subsystem's name and its public documentation (not from the notes' wording).
DESCRIPTIONS = {
    "alertmanager": "routing, grouping, silencing and sending alert notifications; "
    "the Alertmanager cluster",
    "etcd": "the key-value store that holds cluster state: members, leader, quorum, database size",
    "general": "alerts about the monitoring setup itself: targets down, watchdog, "
    "informational alerts",
    "kube-state-metrics": "the exporter that publishes Kubernetes object state as metrics",
    "kubernetes": "pods, deployments, jobs, volumes, kubelet, API server and cluster capacity",
    "node": "host health from node-exporter: CPU, memory, disks, file systems, network, clock",
    "prometheus": "the monitoring server: scraping, rule evaluation, storage, remote write",
    "prometheus-operator": "the operator that manages Prometheus and Alertmanager from "
    "custom resources",
}
TOP_CHOICE = Target("value", ">=", 85.0, ">= 85 %")
APPLIED_RIGHT = Target("value", ">=", 90.0, ">= 90 %")
BEATS_BASELINE = Target("ratio", ">=", 1.0, ">= keyword baseline")


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


def shipped_spec_for_runbooks(path: Path, model: dict[str, Any], decide: str) -> Path:
    """``specs/librarian.yaml`` with the runbooks' taxonomy and goal, ``model`` and ``decide``."""
    doc = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    doc.update(name="bench-runbooks", goal=GOAL)
    doc["taxonomy"] = {"topics": list(RUNBOOK_SUBSYSTEMS), "descriptions": DESCRIPTIONS}
    doc["model"] = {**doc["model"], **model}
    doc["judgement"] = {**doc["judgement"], "decide": decide}
    doc["prompt_pack"] = str((SPEC.parent / doc["prompt_pack"]).resolve())
    doc.pop("schedule", None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _run(root: Path, name: str, model: LocalModel, decide: str, notes: list[str]) -> dict:
    from toolwire.librarian.job import prepare_run, run_librarian
    from toolwire.librarian.notes.workspace import Workspace
    from toolwire.librarian.summary import current_topic

    corpus = runbooks_dir() / "notes"
    ws = copy_notes(corpus, root / f"ws-{name}", [f"{n}.md" for n in notes])
    spec = shipped_spec_for_runbooks(root / f"spec-{name}.yaml", model.block, decide)
    ctx = prepare_run(spec, workspace=ws, db=root / f"store-{name}.duckdb")
    timed = ctx.provider = TimedProvider(ctx.provider)
    started = time.perf_counter()
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    run_s = time.perf_counter() - started
    topics = list(RUNBOOK_SUBSYSTEMS)
    after = {n.note_id: current_topic(n, topics) for n in Workspace.load(ws).notes.values()}
    applied = {
        o.operation.target_note_id: o.operation.body_markdown.split("\n")[0].strip()
        for o in result.outcomes
        if o.status == "applied" and o.operation.kind == "retag_note"
    }
    return {
        "label": model.label,
        "status": result.status,
        "error": result.error_code,
        "judgements": ctx.judgements,
        "after": after,
        "applied": applied,
        "statuses": Counter(o.status for o in result.outcomes),
        "run_s": run_s,
        "model_s": timed.seconds,
        "model_calls": timed.calls,
        "attempts": len(result.attempts),
        "first_try_ok": sum(a.parse_ok for a in result.attempts if a.kind == "initial"),
    }


def _pct(hits: int, total: int) -> float:
    return 100.0 * hits / total if total else float("nan")


def calibration_table(
    confidences: list[float], right: list[bool]
) -> tuple[list[str], list[tuple[float, float, int, float]]]:
    """The markdown table (confidence bin, notes, right) and its rows."""
    from toolwire.librarian.judge.scorer import expected_calibration

    rows = expected_calibration(confidences, right, bins=5)
    lines = ["| confidence | notes | right |", "|---|---|---|"]
    for lo, hi, n, acc in rows:
        lines.append(f"| {lo:.1f}-{hi:.1f} | {n} | " + (f"{acc * 100:.1f} % |" if n else "— |"))
    return lines, rows


def _rows(fig: Figure, name: str, out: dict, labels: dict[str, str], keyword: float) -> None:
    notes = list(out["after"])
    judged = out["judgements"]
    top = [n for n in notes if n in judged and judged[n].best.topic == labels[n]]
    right_after = [n for n in notes if out["after"][n] == labels[n]]
    applied_right = [n for n, t in out["applied"].items() if t == labels.get(n)]
    who = f"{name} ({out['label']}, {len(notes)} notes)"
    fig.add(
        Row(
            f"{who}: top choice right",
            _pct(len(top), len(notes)),
            "%",
            baseline=keyword,
            baseline_label="keyword count, same notes",
            ratio_label="x keyword",
            target=TOP_CHOICE,
            why=f"run {out['status']}" + (f" ({out['error']})" if out["error"] else ""),
        )
    )
    fig.add(
        Row(
            f"{name}: applied retags right",
            _pct(len(applied_right), len(out["applied"])),
            "%",
            target=APPLIED_RIGHT,
            why=f"{len(applied_right)} of {len(out['applied'])} applied; outcomes "
            f"{dict(out['statuses'])}",
        )
    )
    fig.add(
        Row(
            f"{name}: notes with the right topic after the run (deferred = wrong)",
            _pct(len(right_after), len(notes)),
            "%",
            baseline=keyword,
            baseline_label="keyword count, same notes",
            ratio_label="x keyword",
            target=BEATS_BASELINE,
        )
    )
    fig.add(
        Row(
            f"{name}: seconds per note (run_librarian wall / notes)",
            out["run_s"] / max(1, len(notes)),
            "s/note",
            why=f"{out['model_calls']} model calls, {out['model_s']:.1f} s in the model; "
            f"{out['first_try_ok']}/{out['attempts']} attempts valid first try",
        )
    )
    confidences = [judged[n].best.confidence for n in notes if n in judged]
    right = [judged[n].best.topic == labels[n] for n in notes if n in judged]
    table, bins = calibration_table(confidences, right)
    fig.notes.append(f"{name}: calibration of the top choice's confidence\n\n" + "\n".join(table))
    fig.extra.setdefault("calibration", {})[name] = bins


def run(fig: Figure, *, quick: bool) -> None:
    corpus = runbooks_dir()
    if not (corpus / "labels.csv").is_file():
        fig.status = "skipped"
        fig.notes.append(f"corpus not found at {corpus} (set TOOLWIRE_BENCH_RUNBOOKS)")
        return
    labels = load_runbook_labels(corpus)
    notes = pick_notes(labels, 3 if quick else None)
    texts = {n: (corpus / "notes" / f"{n}.md").read_text(encoding="utf-8") for n in notes}
    keyword_guesses = {n: keyword_guess(texts[n], RUNBOOK_SUBSYSTEMS) for n in notes}
    keyword = _pct(sum(keyword_guesses[n] == labels[n] for n in notes), len(notes))
    fig.method = (
        f"{len(notes)} runbooks" + (" (3 per subsystem, --quick)" if quick else "") + "; the "
        "shipped specs/librarian.yaml (judgement, constraints, min_confidence, model) with "
        "the eight subsystems as taxonomy, one-line descriptions written for this figure "
        f"(bench/fig5_accuracy.DESCRIPTIONS), goal {GOAL!r}; one run over all notes. The "
        "keyword baseline (most frequent subsystem name) is scored on the same notes."
    )
    fig.notes.append(f"Keyword baseline: {keyword:.1f} % of {len(notes)} notes.")
    models: list[tuple[str, LocalModel | None, str]] = [("bundled", None, "scorer")]
    endpoint = endpoint_model()
    if endpoint is None:
        fig.notes.append(
            "decide: model (a capable model choosing among the scorer's candidates): not "
            "measured here (set TOOLWIRE_OPENAI_BASE_URL and TOOLWIRE_BENCH_OPENAI_MODEL)."
        )
    else:
        models.append(("endpoint-decides", endpoint, "model"))
    with tempfile.TemporaryDirectory(prefix="bench-runbooks-") as tmp:
        for name, model, decide in models:
            try:
                if model is None:
                    with local_model() as lm:
                        out = _run(Path(tmp), name, lm, decide, notes)
                else:
                    out = _run(Path(tmp), name, model, decide, notes)
            except Exception as exc:  # an endpoint that is down must not lose the rest
                fig.status = "partial"
                fig.notes.append(f"{name}: not measured: {type(exc).__name__}: {exc}")
                continue
            _rows(fig, name, out, labels, keyword)
    fig.extra["keyword_accuracy_pct"] = keyword
