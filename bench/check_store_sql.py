"""`toolwire check-store` against the plain SQL it is equivalent to (issue 47: at most 2x).

``python -m bench.check_store_sql [--runs N] [--per-run K] [--out FILE]``

Builds one store with N runs (1,000 by default) and K attempts, operations and tool
calls per run (20: 20,000 rows each; every row passes every check), then measures,
each in a fresh process so wall time and peak memory are its own, twice each:

- ``check-store``: ``toolwire check-store --format json``, as a user runs it;
- ``sql``: ``toolwire sql`` with the equivalent plain query: every check's count of
  broken rows over its frame (the five frames' aggregates in one UNION ALL);
- ``check_store()`` and ``duckdb``: the same two without the CLI, the library call
  against a process that only imports duckdb and runs those aggregates.

Peak memory is the child's own ``VmHWM`` (``ru_maxrss`` would carry the parent's
peak across ``execve``, NOTES.md). Timings on a shared 2-core machine are noisy: the
routes alternate and the JSON keeps the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["build_store", "equivalent_sql", "main"]


def build_store(path: Path, runs: int, per_run: int) -> None:
    """A migrated store of ``runs`` runs, each with ``per_run`` attempts, operations and
    tool calls (valid data)."""
    import duckdb

    from toolwire.store import Store

    Store(path).query("SELECT 1")  # create and migrate the schema, then let go of it
    rows = runs * per_run
    hex64 = "'" + "ab" * 32 + "'"
    with duckdb.connect(str(path)) as con:
        con.execute(
            f"INSERT INTO specs (spec_hash, name, version, canonical_json) "
            f"VALUES ({hex64}, 'bench', '1', '{{\"constraints\": {{}}}}')"
        )
        con.execute(
            f"""INSERT INTO runs BY NAME
                SELECT 'run-' || lpad(i::VARCHAR, 6, '0') AS run_id, {hex64} AS spec_hash,
                       {hex64} AS pack_hash, 'bench' AS spec_name, 'librarian' AS job,
                       'xml_attrless' AS transport, 'replay' AS provider, 'x' AS model,
                       'ok' AS status, TIMESTAMP '2025-01-01' AS started_at
                FROM range({runs}) r(i)"""
        )
        run_of = f"'run-' || lpad((i // {per_run})::VARCHAR, 6, '0')"
        con.execute(
            f"""INSERT INTO attempts BY NAME
                SELECT {run_of} AS run_id, (i % {per_run})::INTEGER AS turn, 0 AS attempt,
                       'initial' AS kind, '<librarian_response/>' AS raw_text, true AS parse_ok,
                       TIMESTAMP '2025-01-01' AS started_at
                FROM range({rows}) r(i)"""
        )
        con.execute(
            f"""INSERT INTO operations BY NAME
                SELECT {run_of} AS run_id, (i % {per_run})::INTEGER AS turn, 0 AS seq,
                       'retag_note' AS kind, 'applied' AS status, (i % 100) / 100.0 AS confidence
                FROM range({rows}) r(i)"""
        )
        con.execute(
            f"""INSERT INTO tool_calls BY NAME
                SELECT {run_of} AS run_id, (i % {per_run})::INTEGER AS turn, 0 AS seq,
                       'read_file' AS tool, 'success' AS status
                FROM range({rows}) r(i)"""
        )
        con.execute("CHECKPOINT")


def equivalent_sql() -> str:
    """The plain query check-store's checks amount to: per frame, its rows and each
    check's broken rows (the predicates check-store evaluates), in one statement."""
    from toolwire.store.quality import CHECKS, FRAMES, _frame_sql, unexpected_sql

    parts = []
    for frame in dict.fromkeys(c.frame for c in CHECKS):
        checks = [c for c in CHECKS if c.frame == frame]
        counts = " + ".join(f"count(*) FILTER (WHERE {unexpected_sql(c)})" for c in checks)
        parts.append(
            f"SELECT '{frame}' AS frame, count(*) AS rows_checked, {counts} AS broken "
            f"FROM ({_frame_sql(frame, checks)})"
        )
    assert set(FRAMES) >= {c.frame for c in CHECKS}
    return " UNION ALL ".join(parts)


_PEAK = r"""
import atexit, sys
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("VMHWM_KB " + line.split()[1] + "\n")
atexit.register(_peak)
"""
_LIBRARY = (
    _PEAK
    + r"""
from toolwire.store import Store
from toolwire.store.quality import check_store
report = check_store(Store(sys.argv[1]))
print("ok" if report.ok else "FAILED")
"""
)
_DUCKDB = (
    _PEAK
    + r"""
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
rows = con.execute(sys.argv[2]).fetchall()
print("ok" if all(r[2] == 0 for r in rows) else "FAILED")
"""
)


def _command(route: str, db: Path, sql: str) -> list[str]:
    cli = [sys.executable, "-c", _PEAK + "from toolwire.cli import main; main()"]
    return {
        "check-store": [*cli, "check-store", "--db", str(db), "--format", "json"],
        "sql": [*cli, "sql", sql, "--db", str(db), "--format", "csv"],
        "check_store()": [sys.executable, "-c", _LIBRARY, str(db)],
        "duckdb": [sys.executable, "-c", _DUCKDB, str(db), sql],
    }[route]


def _measure(route: str, db: Path, sql: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.run(_command(route, db, sql), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    peak = [ln for ln in proc.stderr.splitlines() if ln.startswith("VMHWM_KB ")]
    return {
        "route": route,
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(int(peak[-1].split()[1]) / 1024) if peak else None,
        "exit": proc.returncode,
        "load_before": load,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.check_store_sql", description=__doc__)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--per-run", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args(argv)
    sql = equivalent_sql()
    pairs = (("check-store", "sql"), ("check_store()", "duckdb"))
    with tempfile.TemporaryDirectory(prefix="toolwire-check-store-") as tmp:
        db = Path(tmp) / "store.duckdb"
        start = time.perf_counter()
        build_store(db, args.runs, args.per_run)
        built = time.perf_counter() - start
        results = [
            _measure(route, db, sql) for _ in range(args.repeat) for pair in pairs for route in pair
        ]
    best = {
        route: min((r for r in results if r["route"] == route), key=lambda r: r["seconds"])
        for pair in pairs
        for route in pair
    }
    for route, r in best.items():
        print(f"{route:<14} {r['seconds']:>6.2f} s  peak {r['peak_rss_mb']} MB  exit {r['exit']}")
    ratios = {}
    for checked, plain in pairs:
        a, b = best[checked], best[plain]
        ratios[f"{checked} / {plain}"] = {
            "time": round(a["seconds"] / b["seconds"], 2),
            "memory": round(a["peak_rss_mb"] / b["peak_rss_mb"], 2),
        }
        print(f"{checked} / {plain}: time {ratios[f'{checked} / {plain}']['time']}x, "
              f"memory {ratios[f'{checked} / {plain}']['memory']}x")  # fmt: skip
    doc = {"runs": args.runs, "rows_per_table": args.runs * args.per_run}
    doc |= {"build_s": round(built, 1), "best": best, "ratios": ratios, "results": results}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
