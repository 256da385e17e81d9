"""`toolwire check-store` at a million rows: GE inside DuckDB against GE on pandas frames.

``python -m bench.check_store_1m [--rows N] [--out FILE]``

Builds one store with 10,000 runs and N attempts, N operations and N tool calls
(N = 1,000,000 by default; every row passes every check), then runs the 18 checks
twice, each in a fresh process so wall time and peak memory are its own:

- ``sql``: ``toolwire.store.quality.check_store`` as shipped (GE's SQL datasource on
  the store's connection: DuckDB computes the metrics);
- ``pandas``: the previous route, kept here only to compare: every frame read
  with ``Store.query`` into Python rows, then a pandas DataFrame, then GE.

Peak memory is the child's own ``VmHWM`` (``ru_maxrss`` would carry the parent's
peak across ``execve``, NOTES.md). Timings on a shared 2-core machine are noisy:
the two routes run back to back, pandas first, and the JSON keeps the load average.
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

__all__ = ["build_store", "main"]

RUNS = 10_000


def build_store(path: Path, rows: int) -> None:
    """A migrated store holding ``rows`` attempts, operations and tool calls (valid data)."""
    import duckdb

    from toolwire.store import Store

    Store(path).query("SELECT 1")  # create and migrate the schema, then let go of it
    per_run = max(1, rows // RUNS)
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
                FROM range({RUNS}) r(i)"""
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


# The previous route, verbatim in spirit: frames pulled into pandas, then GE.
_PANDAS_ROUTE = r"""
import sys
import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
from toolwire.store import quality
from toolwire.store import Store

store = Store(sys.argv[1])
context = quality._gx_context()
source = context.data_sources.add_pandas("toolwire")
ok = True
for frame_name in dict.fromkeys(c.frame for c in quality.CHECKS):
    sql, index_columns = quality.FRAMES[frame_name]
    columns, rows = store.query(sql)
    frame = pd.DataFrame.from_records(rows, columns=columns)
    batch = (source.add_dataframe_asset(name=frame_name)
             .add_batch_definition_whole_dataframe("all")
             .get_batch(batch_parameters={"dataframe": frame}))
    suite = gx.ExpectationSuite(name=frame_name)
    for check in quality.CHECKS:
        if check.frame == frame_name:
            suite.add_expectation(getattr(gxe, check.expectation)(**check.kwargs))
    result = batch.validate(suite, result_format={
        "result_format": "COMPLETE", "unexpected_index_column_names": list(index_columns)})
    ok = ok and result.success
print("ok" if ok else "FAILED")
"""

_SQL_ROUTE = r"""
import sys
from toolwire.store.quality import check_store
from toolwire.store import Store

report = check_store(Store(sys.argv[1]))
print("ok" if report.ok else "FAILED " + ", ".join(r.summary() for r in report.failures))
"""

_PEAK = r"""
import atexit, sys
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("VMHWM_KB " + line.split()[1] + "\n")
atexit.register(_peak)
"""


def _measure(route: str, db: Path) -> dict[str, Any]:
    code = _PEAK + (_SQL_ROUTE if route == "sql" else _PANDAS_ROUTE)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    peak = [ln for ln in proc.stderr.splitlines() if ln.startswith("VMHWM_KB ")]
    return {
        "route": route,
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(int(peak[-1].split()[1]) / 1024) if peak else None,
        "verdict": proc.stdout.strip() or f"exit {proc.returncode}: {proc.stderr[-400:]}",
        "load_before": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.check_store_1m", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolwire-check-store-") as tmp:
        db = Path(tmp) / "store.duckdb"
        start = time.perf_counter()
        build_store(db, args.rows)
        built = time.perf_counter() - start
        results = [_measure("pandas", db), _measure("sql", db)]
    doc = {"rows_per_table": args.rows, "runs": RUNS, "build_s": round(built, 1)}
    doc["results"] = results
    for r in results:
        print(f"{r['route']:<7} {r['seconds']:>7.2f} s  peak {r['peak_rss_mb']} MB  {r['verdict']}")
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
