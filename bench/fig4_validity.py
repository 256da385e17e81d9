"""Figure 4: does SmolLM2-135M write a valid envelope, with the grammar and without?

A fixed corpus of librarian requests built from ``data/notes`` (every note x
two variations of goal and taxonomy order: 52 requests) is sent through the
engine's turn step (``run_turn``: call, parse, validate, repair) twice per
request, grammar on and grammar off, alternating. Counted per request:
first-try validity, repairs, tokens spent on repairs (input + output of repair
attempts), seconds. Target with grammar: 100 % valid first try, 0 repairs.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fixtures import NOTES_DIR, SAMPLE_TOPICS, NullStore, copy_notes, write_spec
from bench.harness import Figure, Row, Target
from bench.local_model import local_model

__all__ = ["run", "VARIATIONS"]

# (goal, topics): the default goal in taxonomy order, and another wording with the
# taxonomy reversed, so a model cannot lean on the first topic it sees.
VARIATIONS: tuple[tuple[str | None, tuple[str, ...]], ...] = (
    (None, SAMPLE_TOPICS),
    (
        "Sort every note into the taxonomy: pick the one topic that fits it best.",
        tuple(reversed(SAMPLE_TOPICS)),
    ),
)


def _arm(
    root: Path, ws: Path, model: dict[str, Any], *, grammar: bool, variant: int, repairs: int
) -> tuple[Any, list[Any]]:
    """A run context (store that keeps nothing, one shared provider) and its requests."""
    from toolwire.librarian.job import build_requests, load_context, load_workspace
    from toolwire.providers import make_provider

    goal, topics = VARIATIONS[variant]
    spec = write_spec(
        root / f"spec-{'g' if grammar else 'n'}{variant}.yaml",
        name=f"bench-validity-{'grammar' if grammar else 'none'}-{variant}",
        model=model,
        topics=topics,
        goal=goal,
        constrain="grammar" if grammar else "none",
        max_repair_retries=repairs,
        max_tokens=256,
    )
    ctx = load_context(spec, workspace=ws)
    ctx.provider = make_provider(ctx.model_cfg, base_dir=ctx.loaded.base_dir)
    ctx.store = NullStore()
    return ctx, build_requests(ctx, load_workspace(ctx))


def _turn(ctx: Any, tr: Any) -> dict[str, Any]:
    from toolwire.librarian.job import run_turn

    start = time.perf_counter()
    out = run_turn(ctx, tr)
    spent = time.perf_counter() - start
    repairs = [a for a in out.attempts if a.kind == "repair"]
    return {
        "first_try_valid": out.attempts[0].parse_ok,
        "valid": out.ok,
        "repairs": len(repairs),
        "repair_tokens": sum((a.input_tokens or 0) + (a.output_tokens or 0) for a in repairs),
        "output_tokens": sum(a.output_tokens or 0 for a in out.attempts),
        "length_stops": sum(1 for a in out.attempts if a.finish_reason == "length"),
        "seconds": spent,
        "first_error": out.attempts[0].error_code,
    }


def _summary(results: list[dict[str, Any]]) -> dict[str, float]:
    n = len(results) or 1
    return {
        "first_try_valid_pct": 100.0 * sum(r["first_try_valid"] for r in results) / n,
        "valid_pct": 100.0 * sum(r["valid"] for r in results) / n,
        "repairs_per_request": sum(r["repairs"] for r in results) / n,
        "repair_tokens_per_request": sum(r["repair_tokens"] for r in results) / n,
        "s_per_request": sorted(r["seconds"] for r in results)[len(results) // 2]
        if results
        else float("nan"),
        "mean_s_per_request": sum(r["seconds"] for r in results) / n,
    }


def run(fig: Figure, *, quick: bool) -> None:
    no_grammar_repairs = 1 if quick else 2
    with tempfile.TemporaryDirectory(prefix="bench-validity-") as tmp, local_model() as lm:
        root = Path(tmp)
        ws = copy_notes(NOTES_DIR, root / "notes")
        arms: dict[bool, list[tuple[Any, list[Any]]]] = {True: [], False: []}
        for grammar in (True, False):
            for variant in range(len(VARIATIONS)):
                arms[grammar].append(
                    _arm(
                        root,
                        ws,
                        lm.block,
                        grammar=grammar,
                        variant=variant,
                        repairs=2 if grammar else no_grammar_repairs,
                    )
                )
        # Request-major, variations alternating: any prefix (a budget stop) covers both.
        n_notes = min(len(arms[True][v][1]) for v in range(len(VARIATIONS)))
        pairs = [(v, i) for i in range(n_notes) for v in range(len(VARIATIONS))]
        if quick:
            pairs = pairs[::3]  # every third request of each variation: ~18 requests
        fig.method = (
            f"{len(pairs)} requests ({len(arms[True][0][1])} notes of data/notes x "
            f"{len(VARIATIONS)} variations of goal and taxonomy order"
            + (", every third in --quick" if quick else "")
            + f"), one note per request, temperature 0, max_tokens 256, model {lm.label}. "
            "Each request runs grammar-on then grammar-off (order alternating), through the "
            f"engine's run_turn with up to 2 repairs (grammar) / {no_grammar_repairs} "
            "(no grammar); the store is replaced by one that keeps nothing."
        )
        fig.extra["model"] = lm.label
        results: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        started = time.perf_counter()
        for k, (variant, index) in enumerate(pairs):
            if fig.over_budget(started):
                fig.status = "partial"
                fig.notes.append(
                    f"Stopped after {k} of {len(pairs)} requests: the --model-budget-min "
                    f"budget ({(fig.budget_s or 0) / 60:.0f} min) was spent (load average "
                    f"{os.getloadavg()[0]:.1f} on 2 cores)."
                )
                break
            order = (True, False) if k % 2 == 0 else (False, True)
            for grammar in order:
                ctx, requests = arms[grammar][variant]
                results[grammar].append(_turn(ctx, requests[index]))
            if k % 10 == 9:
                print(f"    ... {k + 1}/{len(pairs)} requests", flush=True)
        for grammar in (True, False):
            for ctx, _ in arms[grammar]:
                ctx.provider.close()
    g, n = _summary(results[True]), _summary(results[False])
    fig.extra["per_request"] = {"grammar": results[True], "none": results[False]}
    fig.extra["summary"] = {"grammar": g, "none": n}
    base = "no grammar"
    fig.add(
        Row(
            f"first-try valid, with grammar ({len(results[True])} requests)",
            g["first_try_valid_pct"],
            "%",
            baseline=n["first_try_valid_pct"],
            baseline_label=base,
            ratio_label="x",
            target=Target("value", ">=", 100.0, "100 %"),
        )
    )
    fig.add(
        Row(
            "valid after repairs, with grammar",
            g["valid_pct"],
            "%",
            baseline=n["valid_pct"],
            baseline_label=base,
            ratio_label="x",
        )
    )
    fig.add(
        Row(
            "repairs per request, with grammar",
            g["repairs_per_request"],
            "",
            baseline=n["repairs_per_request"],
            baseline_label=base,
            ratio_label="x",
            target=Target("value", "<=", 0.0, "0"),
        )
    )
    fig.add(
        Row(
            "tokens spent on repairs per request, with grammar",
            g["repair_tokens_per_request"],
            "tokens",
            baseline=n["repair_tokens_per_request"],
            baseline_label=base,
            ratio_label="x",
        )
    )
    fig.add(
        Row(
            "seconds per request (median), with grammar",
            g["s_per_request"],
            "s/request",
            baseline=n["s_per_request"],
            baseline_label=base,
            ratio_label="x",
        )
    )
    codes: dict[str, int] = {}
    for r in results[False]:
        if r["first_error"]:
            codes[r["first_error"]] = codes.get(r["first_error"], 0) + 1
    stops = sum(r["length_stops"] for r in results[False])
    fig.notes.append(
        f"Without grammar, first-attempt errors: {codes or 'none'}; {stops} attempts stopped "
        "at max_tokens."
    )
    fig.extra["headline"] = (
        f"grammar {g['first_try_valid_pct']:.0f} % first-try valid, "
        f"{g['repairs_per_request']:.2f} repairs/request; none "
        f"{n['first_try_valid_pct']:.0f} %"
    )
    if fig.missed:
        fig.proposals.append(
            "Grammar-constrained answers failing validation: read the stored raw texts of the "
            'failed attempts (`toolwire sql "select raw_text, error_codes from attempts where '
            'not parse_ok"`) and tighten the grammar to exclude what the parser rejects.'
        )
