"""``python -m bench [--quick] [--only parse,store] [--out DIR]``: run the figures, write results.

Figures run in a fixed order, the model-bound ones last (they take most of the
time, and the cheap figures should not wait behind them). A figure that
fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench import FIGURES, figure_module
from bench.harness import Figure

__all__ = ["main"]


def _quiet_prefect() -> None:
    """A scratch Prefect home (its temporary server's SQLite lives there), quiet and
    offline; explicit settings in the environment win."""
    home = Path(tempfile.gettempdir()) / "toolwire-bench-prefect"
    os.environ.setdefault("PREFECT_HOME", str(home))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _quiet_logs() -> None:
    """Replayed runs make the post-run profile synthesis (seed 004) ask the replay
    script for one more completion; it fails fast and is dropped by design, with
    a warning per run that would bury the figures' output."""
    logging.getLogger("toolwire.memory").setLevel(logging.ERROR)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    keys = [key for key, _, _ in FIGURES]
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and model requests")
    parser.add_argument(
        "--only", default="", help=f"comma-separated figures to run, of: {','.join(keys)}"
    )
    parser.add_argument(
        "--model-budget-min",
        type=float,
        default=None,
        help="stop each model-bound figure (4, 5, 6) from starting new requests after this "
        "many minutes; it then reports what it measured as partial (default: no limit)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="folder for RESULTS.md and results.json (default: bench/)",
    )
    args = parser.parse_args(argv)
    chosen = [k.strip() for k in args.only.split(",") if k.strip()] or keys
    unknown = sorted(set(chosen) - set(keys))
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; choose from {keys}")
    args.chosen = chosen
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    _quiet_prefect()
    _quiet_logs()
    from bench.report import machine_info, package_versions, write_results

    started = time.perf_counter()
    meta = {
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "figures_run": args.chosen,
        "model_budget_min": args.model_budget_min,
        "machine": machine_info(),
        "versions": package_versions(),
    }
    figures: list[Figure] = _carried_over(args)
    for key, number, title in FIGURES:
        if key not in args.chosen:
            continue
        fig = Figure(key, number, title)
        if args.model_budget_min is not None:
            fig.budget_s = args.model_budget_min * 60
        print(f"[bench] {number}. {title} ...", flush=True)
        t0 = time.perf_counter()
        try:
            figure_module(key).run(fig, quick=args.quick)
        except Exception as exc:  # one broken figure must not lose the others' numbers
            fig.status = "error"
            fig.notes.append(f"failed: {type(exc).__name__}: {exc}")
            fig.extra["traceback"] = traceback.format_exc()
            print(fig.extra["traceback"], file=sys.stderr, flush=True)
        fig.seconds = time.perf_counter() - t0
        figures.append(fig)
        _print_figure(fig)
        # Write after every figure: a long run interrupted late keeps what it measured.
        meta["seconds"] = time.perf_counter() - started
        meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        write_results(args.out, meta, sorted(figures, key=lambda f: f.number))
    md, js = write_results(args.out, meta, sorted(figures, key=lambda f: f.number))
    print(f"[bench] wrote {md} and {js} in {meta['seconds'] / 60:.1f} min", flush=True)
    return 0


def _carried_over(args: argparse.Namespace) -> list[Figure]:
    """With ``--only``, the other figures of the last full results are kept, each saying
    when it was measured: a re-run of one slow figure must not erase the rest."""
    previous = args.out / "results.json"
    if len(args.chosen) == len(FIGURES) or not previous.is_file():
        return []
    data = json.loads(previous.read_text(encoding="utf-8"))
    kept = []
    for raw in data.get("figures", []):
        if raw["key"] in args.chosen:
            continue
        fig = Figure.from_json(raw)
        # A figure that already says where it was measured keeps saying so: the previous
        # file's command is only another carry-over's, not this figure's.
        if not any(n.startswith(("Carried over", "Measured by")) for n in fig.notes):
            fig.notes.insert(
                0,
                f"Carried over from `{data.get('command')}` of {data.get('date')} "
                f"(load average at its start {data['machine'].get('load_average_start')}).",
            )
        kept.append(fig)
    return kept


def _print_figure(fig: Figure) -> None:
    from bench.report import format_met, format_ratio, format_value

    print(f"[bench] {fig.number}. {fig.title}: {fig.status} in {fig.seconds:.0f} s", flush=True)
    for row in fig.rows:
        print(
            f"    {row.measure}: {format_value(row.value, row.unit)}"
            + (f" vs {format_value(row.baseline, row.unit)}" if row.baseline is not None else "")
            + f" -> {format_ratio(row)}"
            + (f" [target {row.target.text}: {format_met(row)}]" if row.target else ""),
            flush=True,
        )
    for note in fig.notes:
        print(f"    note: {note}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
