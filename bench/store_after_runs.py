"""A store written by many unchanged nightly runs: its size per run and `check-store`'s
peak memory on it (issue 29: under 200 bytes per unchanged note per run; check-store
on a store of 1,000 such runs under 1 GB).

``python -m bench.store_after_runs [--runs 1000] [--notes 200]``

With edits (the embedding cache's growth, issue 29 follow-up):
``python -m bench.store_after_runs --runs 120 --notes 200 --edits 10 --keep-days 30 --no-check``
runs one run a day (the store's clock, ``store.evidence.utc_today``, moves a day per
run), each after ``--edits`` notes were edited (a new revision line in the text the
scorer embeds), and reports ``embedding_cache``'s rows and vector bytes; compare
``--keep-days 0`` (never evict: the store before eviction) with the default 30.

Builds a synthetic vault (``bench.scale_vault``, 20 % untitled) and runs the shipped
spec's judgement over it ``--runs`` times with the stand-in embedder (an unchanged run
never embeds anyway) and a model that cannot answer (none is asked). Then runs
``toolwire check-store`` on the store in a child process and reads its peak resident
memory (``VmHWM`` of the child, via ``/usr/bin/time -v`` when present).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import yaml

from bench.fixtures import REPO
from bench.scale_vault import build_vault, stand_in_embedder

if TYPE_CHECKING:
    from toolwire.store import Store


def _spec(root: Path) -> Path:
    doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    (root / "empty.jsonl").write_text("", encoding="utf-8")
    doc["model"]["name"] = f"replay:{root / 'empty.jsonl'}"
    doc["prompt_pack"] = str(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small")
    doc.pop("schedule", None)
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


_DAY0 = date(2026, 1, 1)
_REVISION = re.compile(r"^Revision \d+ of day \d+\.$", re.M)


def _edit(notes: list[Path], day: int, count: int) -> None:
    """Edit ``count`` notes (a different set each day, round robin): the note's revision
    line says which day, so its text (and the start the scorer embeds) is new."""
    for i in range(count):
        path = notes[(day * count + i) % len(notes)]
        text = path.read_text(encoding="utf-8")
        line = f"Revision {day * count + i} of day {day}."
        if _REVISION.search(text):
            text = _REVISION.sub(line, text, count=1)
        else:
            text = text.replace("\n\n", f"\n\n{line}\n\n", 1)
        path.write_text(text, encoding="utf-8")


def _cache_size(store: Store) -> tuple[int, int]:
    """``embedding_cache``'s rows and the bytes of its vectors (4 per float)."""
    _, rows = store.query("SELECT count(*), coalesce(sum(len(vector)), 0) * 4 FROM embedding_cache")
    return int(rows[0][0]), int(rows[0][1])


def _blocks(store: Store) -> dict[str, int]:
    _, rows = store.query(
        "SELECT block_size * used_blocks, block_size * free_blocks FROM pragma_database_size()"
    )
    return {"store_used_block_bytes": int(rows[0][0]), "store_free_block_bytes": int(rows[0][1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--edits", type=int, default=0, help="notes edited before each run")
    parser.add_argument(
        "--keep-days", type=int, default=None, help="TOOLWIRE_KEEP_EMBEDDINGS_DAYS (0: never)"
    )
    parser.add_argument(
        "--daily", action="store_true", help="one run a day even without edits (--edits: always)"
    )
    parser.add_argument("--no-check", action="store_true", help="skip check-store's memory")
    args = parser.parse_args()
    from toolwire.librarian.job import prepare_run, run_librarian
    from toolwire.spec.settings import load_settings
    from toolwire.store import Store

    root = Path(tempfile.mkdtemp(prefix="bench-store-runs-"))
    try:
        spec, db = _spec(root), root / "store.duckdb"
        ws = build_vault(root / "vault", args.notes)
        notes = sorted(ws.rglob("*.md"))
        settings = load_settings(
            **({} if args.keep_days is None else {"keep_embeddings_days": args.keep_days})
        )
        sizes, cache = [], []
        started = time.perf_counter()
        with stand_in_embedder(), ExitStack() as clock:
            for day in range(args.runs):
                if args.edits or args.daily:  # one run a day, after the day's edits
                    clock.close()
                    today = _DAY0 + timedelta(days=day)
                    clock.enter_context(
                        mock.patch("toolwire.store.evidence.utc_today", lambda t=today: t)
                    )
                    _edit(notes, day, args.edits)
                ctx = prepare_run(spec, workspace=ws, db=db, settings=settings)
                try:
                    run_librarian(ctx)
                finally:
                    ctx.provider.close()
                sizes.append(db.stat().st_size)
                cache.append(_cache_size(Store(db)))
        runs_s = time.perf_counter() - started
        if args.no_check:
            check, peak = None, None
        else:
            timer = ["/usr/bin/time", "-v"] if shutil.which("/usr/bin/time") else []
            check = subprocess.run(
                [*timer, sys.executable, "-m", "toolwire", "check-store", "--db", str(db)],
                capture_output=True,
                text=True,
            )
            peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", check.stderr)
        out = {
            "runs": args.runs,
            "notes": args.notes,
            "runs_wall_s": round(runs_s, 1),
            "store_bytes_after_first_run": sizes[0],
            "store_bytes_at_end": sizes[-1],
            # The file's size, not its used blocks: what the disk sees, checkpoints and all.
            "file_bytes_per_note_run_after_the_first": round(
                (sizes[-1] - sizes[0]) / max(1, (len(sizes) - 1) * args.notes), 1
            ),
            # ~12 samples over the runs: the settling runs grow it, later ones should not
            "store_bytes_by_run": sizes[:: max(1, args.runs // 12)],
            "check_store_exit": check.returncode if check else None,
            "check_store_peak_mib": round(int(peak.group(1)) / 1024) if peak else None,
        }
        if args.edits or args.daily:
            out |= {
                "edits_per_run": args.edits,
                "keep_embeddings_days": settings.keep_embeddings_days,
                "embedding_rows_after_first_run": cache[0][0],
                "embedding_rows_at_end": cache[-1][0],
                "embedding_rows_max": max(rows for rows, _ in cache),
                "embedding_vector_bytes_at_end": cache[-1][1],
                # The file's blocks in use and free (reused by later writes) at the end.
                **_blocks(Store(db)),
                # ~12 samples over the runs: how the table grew (or stopped growing)
                "embedding_rows_by_day": [rows for rows, _ in cache[:: max(1, args.runs // 12)]],
            }
        print(json.dumps(out, indent=2))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
