"""Issue #30 item 14: ``check-store`` on a half-written or damaged store file: one line.

On the main of 2026-11-25 a store file cut short (what a copy interrupted
mid-way, or a disk that filled, leaves) made ``check-store`` print Great
Expectations' logged traceback for every frame. Here a real store with runs
and attempts is cut at block boundaries and in the middle of blocks, and
overwritten with zeros and noise; ``check-store`` reads each copy in a child
process: it passes (the damage missed what it reads) or fails with one line
(``error: ...``), never a traceback.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.domain import Attempt
from toolwire.store import Store

AREA = "issue 30 #14: check-store on a damaged file"
BLOCK = 262_144  # DuckDB's block size; the file starts with 3 x 4 KiB headers


def _real_store(path: Path) -> bytes:
    store = Store(path)
    rng = random.Random(14)
    for n in range(6):
        run_id = f"run-{n}"
        row = {"run_id": run_id, "spec_name": "s", "job": "librarian", "model": "m"}
        store.start_run(row | {"transport": "xml_attrless", "provider": "replay"})
        for number in range(3):
            text = "".join(rng.choice("abcdefgh <>/\n") for _ in range(200)) * 300
            store.record_attempt(run_id, Attempt(
                turn=0, attempt=number, kind="initial" if number == 0 else "repair",
                request_id="r", prompt=[{"role": "user", "content": "x"}], raw_text=text,
                parse_ok=True, error_code=None, error_codes=(), input_tokens=1,
                output_tokens=1, latency_ms=1.0, finish_reason="stop", started_at=time.time(),
            ))  # fmt: skip
    del store
    return path.read_bytes()


def _damaged_copies(whole: bytes) -> list[tuple[str, bytes]]:
    rng = random.Random(30)
    header = 3 * 4096
    copies = [(f"cut at {n}", whole[:n]) for n in (0, 4096, header + 1000)]
    copies += [(f"cut after block {b}", whole[: header + b * BLOCK]) for b in range(1, 4)]
    copies += [(f"cut mid block {b}", whole[: header + b * BLOCK + 5000]) for b in range(0, 3)]
    for n in range(4):
        at = rng.randrange(header, len(whole) - 4096)
        size = rng.choice([8, 512, 4096, 65_536])
        noise = os.urandom(size) if n % 2 else bytes(size)
        damaged = whole[:at] + noise + whole[at + size :]
        copies.append((f"{'noise' if n % 2 else 'zeros'} x{size} at {at}", damaged[: len(whole)]))
    return copies


@pytest.mark.timeout(900)
def test_item_14_check_store_on_a_damaged_file_says_one_line(tmp_path: Path, tally: Tally) -> None:
    whole = _real_store(tmp_path / "whole.duckdb")
    assert len(whole) > 4 * BLOCK  # the attempts span several blocks
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    damaged_seen = 0
    for n, (what, data) in enumerate(_damaged_copies(whole)):
        db = tmp_path / f"copy{n}.duckdb"
        db.write_bytes(data)
        done = subprocess.run(
            [sys.executable, "-m", "toolwire", "check-store", "--db", str(db), "--format", "json"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        tally.add(AREA, "inputs tried")
        out = done.stdout + done.stderr
        assert "Traceback" not in out, (what, out[-3000:])
        if done.returncode == 0:
            continue
        assert done.returncode == 1, (what, out[-2000:])
        if done.stderr:  # refused before any report: exactly one line
            assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, (
                what, done.stderr[-2000:],
            )  # fmt: skip
            damaged_seen += "damaged" in done.stderr or "cannot open" in done.stderr
            tally.add(AREA, "refused with one line")
    assert damaged_seen >= 3  # the cuts inside the data were found, not passed over
