"""Issue 45 item 16: ``store merge`` never takes a shard's cached rows on trust.

A shard whose embedding cache held rotated topic vectors was merged as it was, and
the next run, reading its note and topic vectors from the cache, filed 4 of 4 recipes
as ``security``. A cached vector is keyed by its text's hash and cannot be checked
without the text, so the merge now leaves the caches (embeddings, decisions) out and
says so; the next run recomputes them. A real run makes the shard; its cache is then
rotated in place; ``toolwire store merge`` (a process) takes it into a fresh store, and
a run on a copy of the vault with that store decides as the clean run did.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from hostile.review_vault import last_run, ok, sql, write_spec, write_vault
from hostile.tally import Tally

AREA = "issue 45 #16: merged caches"


def _topics(db: Path, run_id: str) -> list[tuple[str, str, str]]:
    """What the run wrote: (note, field, new value), the vault's topic convention's way."""
    rows = sql(db, f"SELECT path, field, new_value FROM note_changes WHERE run_id = '{run_id}' "
                   "ORDER BY path, field")  # fmt: skip
    return [(r["path"], r["field"], r["new_value"]) for r in rows]


def test_a_poisoned_shard_cache_is_left_out_of_a_merge(tmp_path: Path, tally: Tally) -> None:
    vault = write_vault(tmp_path / "vault")
    pristine = tmp_path / "pristine"
    shutil.copytree(vault, pristine)
    spec = write_spec(tmp_path, min_confidence=0.0)
    shard = tmp_path / "shard.duckdb"
    ok("run", spec, "--workspace", vault, "--db", shard, "--no-prefect")
    clean = _topics(shard, last_run(shard))
    assert clean, "the clean run filed nothing"
    con = duckdb.connect(str(shard))
    try:  # every cached vector rotated by one place: still unit length, now wrong
        poisoned = con.execute(
            "UPDATE embedding_cache SET vector = list_concat(vector[2:], vector[1:1])"
        ).fetchone()
    finally:
        con.close()
    assert poisoned and poisoned[0] > 0
    tally.add(AREA, "faults injected")

    target = tmp_path / "target.duckdb"
    merged = ok("store", "merge", shard, "--db", target)
    assert "left out cached rows" in merged.stderr, merged.stderr
    assert sql(target, "SELECT count(*) AS n FROM embedding_cache") == [{"n": 0}]
    assert sql(target, "SELECT count(*) AS n FROM runs") == [{"n": 1}]  # the rest is merged
    tally.add(AREA, "inputs tried")

    ok("run", spec, "--workspace", pristine, "--db", target, "--no-prefect")
    assert _topics(target, last_run(target)) == clean
    tally.add(AREA, "decisions changed", 0)
