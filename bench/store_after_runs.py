"""A store written by many unchanged nightly runs: its size per run and `check-store`'s
peak memory on it (issue 29: under 200 bytes per unchanged note per run; check-store
on a store of 1,000 such runs under 1 GB).

``python -m bench.store_after_runs [--runs 1000] [--notes 200]``

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
from pathlib import Path

import yaml

from bench.fixtures import REPO
from bench.scale_vault import build_vault, stand_in_embedder


def _spec(root: Path) -> Path:
    doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    (root / "empty.jsonl").write_text("", encoding="utf-8")
    doc["model"]["name"] = f"replay:{root / 'empty.jsonl'}"
    doc["prompt_pack"] = str(REPO / "prompt-packs" / "librarian-small")
    doc.pop("schedule", None)
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--notes", type=int, default=200)
    args = parser.parse_args()
    from toolwire.librarian.job import prepare_run, run_librarian

    root = Path(tempfile.mkdtemp(prefix="bench-store-runs-"))
    try:
        spec, db = _spec(root), root / "store.duckdb"
        ws = build_vault(root / "vault", args.notes)
        sizes = []
        started = time.perf_counter()
        with stand_in_embedder():
            for _ in range(args.runs):
                ctx = prepare_run(spec, workspace=ws, db=db)
                try:
                    run_librarian(ctx)
                finally:
                    ctx.provider.close()
                sizes.append(db.stat().st_size)
        runs_s = time.perf_counter() - started
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
            "check_store_exit": check.returncode,
            "check_store_peak_mib": round(int(peak.group(1)) / 1024) if peak else None,
        }
        print(json.dumps(out, indent=2))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
