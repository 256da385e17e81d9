"""Figure 6: what a scheduled librarian run costs, fresh and re-run, per note, against
the embedding-only pass of the same notes (issue 29).

The floor of a run that decides topics is embedding its notes once: the scorer reads
every note through the embedding model, and nothing else a run does needs to cost as
much. A fresh run is measured against that floor; a re-run of a vault that did not
change must cost no embedding and no model call at all; a re-run after 1 % of the
notes were edited must cost about that 1 %.

Two parts, each in one process, baselines in the same run:

A. **Real notes, real embedder** (the shipped spec: e5-small, SmolLM2-135M named but,
   scorer-decided, never asked): a synthetic vault of real note texts (``data/notes``
   and the shared runbooks, varied, 20 % untitled). The embedding-only pass is the
   scorer over the same notes with no store (``judge_notes`` on a render context).
B. **At scale** (5,000 notes; 1,000 with ``--quick``) with a stand-in embedder that
   costs nothing (``bench.scale_vault``): everything a run does *but* embedding.
   An unchanged re-run never calls the embedder (all cache hits), so B measures it
   as it is; a fresh or 1 %-edited run at scale is B's run plus the real embedder's
   cost per note from A (B's texts x A's CPU seconds per text), said so in the row.

CPU seconds (``time.process_time``, every thread of the process) are the measure: the
machine is shared and wall times under load say little. Wall seconds are shown too.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.fixtures import NOTES_DIR, REPO, TimedProvider, runbooks_dir
from bench.harness import Figure, Row, Target
from bench.scale_vault import build_vault, edit_notes, stand_in_embedder

__all__ = ["run"]

SPEC = REPO / "specs" / "librarian.yaml"
UNCHANGED_WALL = Target("value", "<", 30.0, "< 30 s wall for 5,000 notes")
EDITED_WALL = Target("value", "<", 120.0, "< 2 min for 5,000 notes, 1 % edited")
FRESH_RATIO = Target("ratio", "<=", 1.5, "<= 1.5x the embedding-only pass")
NO_WORK = Target("value", "<=", 0.0, "0")
GROWTH = Target("value", "<", 200.0, "< 200 bytes per unchanged note per run")
WASTED = Target("value", "<", 33.3, "< 1/3 of the run")
SETTLE_RUNS = 10


def _spec(root: Path) -> Path:
    """The shipped spec, its model named as shipped (never called when the scorer
    decides), its prompt pack resolved, no schedule."""
    doc = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    doc["prompt_pack"] = str((SPEC.parent / doc["prompt_pack"]).resolve())
    doc.pop("schedule", None)
    path = root / "librarian.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _one_run(spec: Path, ws: Path, db: Path, **kwargs: Any) -> dict[str, Any]:
    from toolwire.librarian import job

    cpu, wall = time.process_time(), time.perf_counter()
    ctx = job.prepare_run(spec, workspace=ws, db=db, **kwargs)
    timed = ctx.provider = TimedProvider(ctx.provider)
    try:
        result = job.run_librarian(ctx)
    finally:
        timed.close()
    return {
        "status": result.status,
        "error": result.error_message,
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.perf_counter() - wall,
        "model_calls": timed.calls,
        "model_s": timed.seconds,
        "turns": result.turns,
        "applied": sum(o.status == "applied" for o in result.outcomes),
        **{k: v for k, v in vars(ctx.costs).items()},
    }


def _settle(run: Callable[[], dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Runs until one changes no note (a fresh vault's first runs title and tag notes,
    and the notes tagged become examples for the next): (the runs, the last)."""
    runs = []
    for _ in range(SETTLE_RUNS):
        runs.append(run())
        if runs[-1]["applied"] == 0:
            break
    return runs, runs[-1]


def _embedding_only(spec: Path, ws: Path) -> dict[str, Any]:
    """The scorer over every note with the spec's embedder and no store: the floor."""
    from toolwire.librarian.decisions import judge_notes
    from toolwire.librarian.job import load_context
    from toolwire.librarian.notes.workspace import Workspace

    cpu, wall = time.process_time(), time.perf_counter()
    ctx = load_context(spec, workspace=ws)
    judge_notes(ctx, Workspace.load(ws))
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def _warm_embedder(spec: Path) -> None:
    """Load and run the embedder once, so neither measured pass pays its first call."""
    from toolwire.librarian.judge import scorer as judge

    embedder = judge.load_embedder(yaml.safe_load(spec.read_text())["judgement"]["embedder"])
    if embedder is not None:
        embedder.embed_notes(["warm-up text for the embedder"])


def _store_bytes(db: Path) -> int:
    """Bytes in the store's used blocks after a checkpoint (the file's size can shrink
    or stay put as DuckDB reuses freed blocks; used blocks are what the data takes)."""
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("CHECKPOINT")
    rows = con.execute("SELECT used_blocks * block_size FROM pragma_database_size()").fetchall()
    con.close()
    return int(rows[0][0]) if rows else 0


def _part_a(root: Path, spec: Path, notes: int) -> dict[str, Any]:
    ws = build_vault(root / "a-vault", notes)
    db = root / "a.duckdb"
    _warm_embedder(spec)
    floor = _embedding_only(spec, ws)
    fresh = _one_run(spec, ws, db)
    settling, settled = _settle(lambda: _one_run(spec, ws, db))
    unchanged = _one_run(spec, ws, db)
    edited_paths = edit_notes(ws, 0.01)
    edited = _one_run(spec, ws, db)
    return {
        "notes": notes,
        "floor": floor,
        "fresh": fresh,
        "settling": settling,
        "unchanged": unchanged,
        "edited": edited,
        "edited_notes": len(edited_paths),
        "settled": settled,
    }


def _part_b(root: Path, spec: Path, notes: int) -> dict[str, Any]:
    ws = build_vault(root / "b-vault", notes)
    db = root / "b.duckdb"
    with stand_in_embedder() as stand_in:
        fresh = _one_run(spec, ws, db)
        settling, _ = _settle(lambda: _one_run(spec, ws, db))
        # The first re-run may still decide every note again (the last settling run's
        # change moved the examples); growth is measured over the runs after it.
        unchanged = [_one_run(spec, ws, db)]
        before = _store_bytes(db)
        unchanged += [_one_run(spec, ws, db) for _ in range(3)]
        growth = (_store_bytes(db) - before) / (3 * notes)
        edited_paths = edit_notes(ws, 0.01)
        edited = _one_run(spec, ws, db)
    return {
        "notes": notes,
        "fresh": fresh,
        "settling": settling,
        "unchanged": unchanged,
        "growth_bytes_per_note_run": growth,
        "edited": edited,
        "edited_notes": len(edited_paths),
        "stand_in_texts": stand_in.texts,
    }


def _quickstart(root: Path, spec: Path) -> dict[str, Any]:
    """The quick start: the shipped spec on a copy of data/notes, fresh store."""
    from bench.fixtures import copy_notes

    ws = copy_notes(NOTES_DIR, root / "quickstart")
    return _one_run(spec, ws, root / "quickstart.duckdb")


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _token_f1(got: str, want: str) -> float:
    a, b = _words(got), _words(want)
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


def hidden_titles() -> dict[str, Any]:
    """Titles derived from notes whose real title was hidden (front-matter title and H1
    removed): data/notes and the shared runbooks. Token F1 against the real title, and
    the share that shares any word with it."""
    from toolwire.librarian.answer import derive_title
    from toolwire.librarian.notes.workspace import parse_note

    scores = []
    for root in (NOTES_DIR, runbooks_dir() / "notes"):
        for path in sorted(root.rglob("*.md")):
            note, _ = parse_note(path.relative_to(root).as_posix(), path.read_bytes())
            if note.title:
                body = re.sub(r"^# .*\n?", "", note.body, count=1, flags=re.M)
                scores.append(_token_f1(derive_title(body), note.title))
    return {
        "notes": len(scores),
        "mean_f1": sum(scores) / max(1, len(scores)),
        "any_word": sum(s > 0 for s in scores) / max(1, len(scores)),
    }


def run(fig: Figure, *, quick: bool) -> None:
    real_notes, scale_notes = (24, 1000) if quick else (96, 5000)
    with tempfile.TemporaryDirectory(prefix="bench-wall-") as tmp:
        root = Path(tmp)
        spec = _spec(root)
        qs = _quickstart(root, spec)
        a = _part_a(root, spec, real_notes)
        b = _part_b(root, spec, scale_notes)
    load = os.getloadavg()[0]
    fig.method = (
        f"`specs/librarian.yaml` as shipped (e5-small scores; SmolLM2-135M is named but a "
        f"scorer-decided run has nothing to ask it). A: a vault of {real_notes} real note "
        "texts (data/notes and the shared runbooks, varied, 20 % untitled) with the real "
        f"embedder. B: {scale_notes} such notes with a stand-in embedder that costs nothing "
        "(bench/scale_vault.py): an unchanged re-run never calls the embedder, so B measures "
        "it as it is; fresh and 1 %-edited runs at scale add the real embedder's CPU per "
        "text measured in A. Each vault is run until a run changes no note before the "
        "unchanged and edited runs. CPU seconds = time.process_time (all threads); the "
        f"machine was shared (load average {load:.1f} at the end), so wall times are high."
    )
    per_text = a["floor"]["cpu_s"] / max(1, a["fresh"]["texts_embedded"])
    n = scale_notes
    fresh_ratio = a["fresh"]["cpu_s"] / max(a["floor"]["cpu_s"], 1e-9)
    fig.add(
        Row(
            f"fresh run, {real_notes} real notes: CPU s per note",
            a["fresh"]["cpu_s"] / real_notes,
            "CPU s/note",
            baseline=a["floor"]["cpu_s"] / real_notes,
            baseline_label="embedding-only pass of the same notes (the scorer, no store)",
            ratio_label="x embedding-only",
            target=FRESH_RATIO,
            why=f"{a['fresh']['texts_embedded']} texts embedded, "
            f"{a['fresh']['model_calls']} model calls, {a['fresh']['applied']} changes applied; "
            f"wall {a['fresh']['wall_s']:.1f} s vs {a['floor']['wall_s']:.1f} s",
        )
    )
    fresh_scale = b["fresh"]["cpu_s"] + per_text * b["fresh"]["texts_embedded"]
    fig.add(
        Row(
            f"fresh run, {n} notes: CPU s (engine measured + real embedder per text from A)",
            fresh_scale,
            "CPU s",
            baseline=per_text * b["fresh"]["texts_embedded"],
            baseline_label=f"embedding-only: {b['fresh']['texts_embedded']} texts x "
            f"{per_text:.3f} CPU s",
            ratio_label="x embedding-only",
            target=FRESH_RATIO,
            why=f"everything but embedding: {b['fresh']['cpu_s']:.1f} CPU s "
            f"({1000 * b['fresh']['cpu_s'] / n:.1f} ms per note), "
            f"wall {b['fresh']['wall_s']:.1f} s",
        )
    )
    last = min(b["unchanged"], key=lambda r: r["wall_s"])
    fig.add(
        Row(
            f"unchanged re-run, {n} notes: wall s (best of 4)",
            last["wall_s"],
            "s",
            target=UNCHANGED_WALL,
            why=f"{last['cpu_s']:.1f} CPU s ({1000 * last['cpu_s'] / n:.2f} ms per note); "
            f"{last['texts_embedded']} texts embedded, {last['model_calls']} model calls, "
            f"{last['decisions_recomputed']} decisions recomputed, {last['turns']} turns",
        )
    )
    fig.add(
        Row(
            f"unchanged re-run, {real_notes} real notes: texts embedded + model calls",
            a["unchanged"]["texts_embedded"] + a["unchanged"]["model_calls"],
            "",
            target=NO_WORK,
            why=f"{a['unchanged']['cpu_s']:.2f} CPU s "
            f"({1000 * a['unchanged']['cpu_s'] / real_notes:.1f} ms per note) vs "
            f"{a['floor']['cpu_s']:.1f} for embedding them",
        )
    )
    edited_scale = b["edited"]["cpu_s"] + per_text * b["edited"]["texts_embedded"]
    fig.add(
        Row(
            f"1 % of {n} notes edited: CPU s (engine measured + real embedder per text)",
            edited_scale,
            "CPU s",
            target=EDITED_WALL,
            why=f"{b['edited_notes']} notes edited, {b['edited']['texts_embedded']} texts "
            f"embedded again, {b['edited']['decisions_recomputed']} decisions recomputed; "
            f"engine {b['edited']['cpu_s']:.1f} CPU s, wall {b['edited']['wall_s']:.1f} s. "
            f"With the real embedder ({real_notes} notes, {a['edited_notes']} edited): "
            f"{a['edited']['cpu_s']:.2f} CPU s, {a['edited']['texts_embedded']} texts",
        )
    )
    fig.add(
        Row(
            "store growth per unchanged note per run",
            b["growth_bytes_per_note_run"],
            "bytes",
            target=GROWTH,
            why=f"used blocks x block size after CHECKPOINT, before and after 3 unchanged runs "
            f"of {n} notes (256 KiB blocks: {262144 / (3 * n):.0f} bytes per note-run each)",
        )
    )
    wasted = 100.0 * qs["model_s"] / max(qs["wall_s"], 1e-9)
    fig.add(
        Row(
            "quick start (data/notes, fresh store): share of the run in model steps",
            wasted,
            "%",
            target=WASTED,
            why=f"{qs['model_calls']} model calls in {qs['wall_s']:.1f} s wall "
            f"({qs['cpu_s']:.1f} CPU s); {qs['applied']} changes applied (titles from each "
            "note's own first sentence, topics by the scorer)",
        )
    )
    titles = hidden_titles()
    fig.add(
        Row(
            f"titles from the note's first sentence vs the hidden real title "
            f"({titles['notes']} titled notes): mean token F1",
            titles["mean_f1"],
            "",
            why=f"{100 * titles['any_word']:.0f} % share a word with the real title; the "
            "bundled model, asked for titles, had none kept on any run (NOTES.md), and the "
            "first heading scored 0.02 (it names a section: 'Meaning', 'January')",
        )
    )
    fig.notes.append(
        f"Settling: A took {len(a['settling'])} runs after the fresh one "
        f"(changes applied: {[r['applied'] for r in a['settling']]}), B "
        f"{len(b['settling'])} ({[r['applied'] for r in b['settling']]}): each run tags "
        "notes whose topic the previous run's new examples made sure; the first re-run also "
        "re-embeds the head of each note that got a title."
    )
    fig.extra.update(part_a=a, part_b=b, quickstart=qs, per_text_cpu_s=per_text, titles=titles)
    fig.extra["headline"] = (
        f"unchanged {n}-note re-run {last['wall_s']:.1f} s wall, "
        f"{last['texts_embedded']} embedded, {last['model_calls']} model calls; "
        f"fresh {fresh_ratio:.2f}x embedding-only"
    )
