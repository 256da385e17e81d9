"""Figure 7: many replayed runs through the Prefect batch flow vs the engine directly.

Each run is a one-note workspace answered by a one-line ``replay:`` script, so
the figure measures orchestration and the store, not a model. The batch arm
is issue 6's ``toolwire.flows.batch.run_batch`` (one Prefect flow, a task per run,
threads task runner, 2 workers, one store); the direct arm calls
``prepare_run`` + ``run_librarian`` in a loop into its own store. Blocks of
runs alternate between the arms. If the batch module is missing, the batch
arm is ``run_librarian_flow`` in a loop, and the figure says so.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.fixtures import (
    make_notes,
    request_order,
    retag_response,
    write_replay_script,
    write_spec,
)
from bench.harness import Figure, Row

__all__ = ["run"]

WORKERS = 2


def _setup(root: Path) -> Path:
    template = make_notes(root / "template", 1)
    spec = write_spec(root / "spec.yaml", name="bench-batch", model="replay:script.jsonl")
    (note_ids,) = request_order(spec, template)
    write_replay_script(root / "script.jsonl", [retag_response(note_ids[0], "databases")])
    return spec


def _workspaces(root: Path, tag: str, n: int) -> list[Path]:
    out = []
    for i in range(n):
        out.append(make_notes(root / f"{tag}-ws-{i:04d}", 1))
    return out


def _direct(spec: Path, workspaces: list[Path], db: Path) -> int:
    from toolwire.librarian.job import prepare_run, run_librarian

    ok = 0
    for ws in workspaces:
        ctx = prepare_run(spec, workspace=ws, db=db)
        ok += run_librarian(ctx).status == "ok"
    return ok


def _batch_flow(spec: Path, workspaces: list[Path], db: Path) -> int:
    from toolwire.flows.batch import run_batch

    result = run_batch(
        spec, workspaces, db=db, task_runner="threads", max_workers=WORKERS, check=False
    )
    if result.lost:
        raise RuntimeError(f"batch lost {result.lost} of {result.planned} runs")
    return sum(1 for o in result.outcomes if o.get("status") == "ok")


def _flow_loop(spec: Path, workspaces: list[Path], db: Path) -> int:
    from toolwire.flows import run_librarian_flow

    return sum(
        run_librarian_flow(spec, workspace=str(ws), db=str(db)).status == "ok" for ws in workspaces
    )


def _pick_batch_arm() -> tuple[str, Callable[[Path, list[Path], Path], int]]:
    try:
        import toolwire.flows.batch as batch

        if hasattr(batch, "run_batch"):
            return (
                f"toolwire.flows.batch.run_batch (Prefect flow, threads x {WORKERS}, one store, "
                "quality check off)",
                _batch_flow,
            )
    except ImportError:
        pass
    return ("run_librarian_flow in a loop (issue 6's batch flow not present)", _flow_loop)


def run(fig: Figure, *, quick: bool) -> None:
    per_block = 25 if quick else 250
    blocks = 2 if quick else 4
    label, batch_arm = _pick_batch_arm()
    fig.method = (
        f"{per_block * blocks:,} runs per arm in {blocks} blocks of {per_block}, blocks "
        "alternating between the arms (D B B D ...), each block into a fresh store file, "
        "workspaces created untimed. One-note workspaces, one replayed turn per run. "
        f"Batch arm: {label}. One small untimed block per arm first (Prefect's server). "
        "Every run ends with seed 004's profile synthesis, whose model call the one-line "
        "replay script cannot answer (dropped by design, model excluded)."
    )
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        root = Path(tmp)
        spec = _setup(root)
        arms: dict[str, Callable[[Path, list[Path], Path], int]] = {
            "direct": _direct,
            "batch": batch_arm,
        }
        for name, fn in arms.items():  # warm-up: imports, Prefect's temporary server
            fn(spec, _workspaces(root, f"warm-{name}", 2), root / f"warm-{name}.duckdb")
        spent = {name: 0.0 for name in arms}
        done = {name: 0 for name in arms}
        rates: dict[str, list[float]] = {name: [] for name in arms}
        order = ["direct", "batch"]
        for b in range(blocks):
            for name in order if b % 2 == 0 else reversed(order):
                ws = _workspaces(root, f"{name}-{b}", per_block)
                start = time.perf_counter()
                ok = arms[name](spec, ws, root / f"{name}-{b}.duckdb")
                took = time.perf_counter() - start
                spent[name] += took
                done[name] += ok
                rates[name].append(per_block / took)
            print(f"    ... block {b + 1}/{blocks}", flush=True)
        check_s = _quality_check_s(root / "batch-0.duckdb")
    total = per_block * blocks
    for name in arms:
        if done[name] != total:
            fig.notes.append(f"{name}: only {done[name]} of {total} runs ended ok")
    direct_rate, batch_rate = total / spent["direct"], total / spent["batch"]
    fig.add(
        Row(
            f"runs/s through {label}",
            batch_rate,
            "runs/s",
            baseline=direct_rate,
            baseline_label="prepare_run + run_librarian in a loop, one store",
            ratio_label="x direct",
            why=(
                f"per run: batch {1000 / batch_rate:.0f} ms, direct {1000 / direct_rate:.0f} ms; "
                "every run makes ~5 store writes, each opening the DuckDB file (figure 2); "
                "writes to one file are serialised by the store's lock, so the two workers "
                "overlap only the rest of each run (and Prefect adds a task per run)"
            ),
        )
    )
    fig.add(
        Row(
            "spread of block rates (batch arm, (max-min)/median)",
            (max(rates["batch"]) - min(rates["batch"])) / sorted(rates["batch"])[blocks // 2],
            "",
            baseline=(max(rates["direct"]) - min(rates["direct"]))
            / sorted(rates["direct"])[blocks // 2],
            baseline_label="same for the direct arm",
            ratio_label="x",
        )
    )
    if check_s is not None:
        fig.notes.append(
            f"The quality check a batch runs at its end by default (check_store on a "
            f"{per_block}-run store): {check_s:.1f} s, not included above."
        )
    fig.extra.update(rates=rates, spent_s=spent, label=label)
    fig.extra["headline"] = (
        f"batch {batch_rate:.1f} runs/s vs direct {direct_rate:.1f} runs/s "
        f"({batch_rate / direct_rate:.2f}x)"
    )
    if batch_rate < direct_rate:
        fig.proposals.append(
            "Batch slower than a plain loop: per run the flow adds a task and a batch-tag "
            "write on top of ~5 connection-per-write store operations that two workers must "
            "take in turn. Hold one connection per worker (figure 2's fix), and write the "
            "batch tag in start_run's row instead of a separate UPDATE."
        )


def _quality_check_s(db: Path) -> float | None:
    try:
        from toolwire.store import Store
        from toolwire.store.quality import check_store
    except ImportError:
        return None
    if not db.exists():
        return None
    start = time.perf_counter()
    try:
        check_store(Store(db))
    except Exception:  # the quality module is someone else's work in progress
        return None
    return time.perf_counter() - start
