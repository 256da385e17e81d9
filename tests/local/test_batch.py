"""Batch runs under Prefect: cross products, worker shards merged into one store, nothing lost.

The big test runs 50 replayed tool-agent runs over two transports with two
worker processes (each writes its own shard, merged at the end), then checks
the store with `toolwire check-store` and breaks a copy of it on purpose.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import MALFORMED, NOTES, VALID, _spec, _workspace

from toolwire.errors import UsageError

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
AGENT_SPEC = REPO / "specs" / "agent-xml.yaml"
AGENT_MODEL = f"replay:{REPO / 'tests' / 'data' / 'replay'}/agent-{{transport}}.jsonl"
SCRATCH = REPO / "tests" / "data" / "tools" / "scratch"


def toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def write_script(path: Path, texts: list[str]) -> str:
    """A replay script of ``texts`` (with token counts); returns its model name."""
    usage = {"finish_reason": "stop", "input_tokens": 120, "output_tokens": 60}
    path.write_text("".join(json.dumps({"text": t} | usage) + "\n" for t in texts), "utf-8")
    return f"replay:{path}"


def librarian_inputs(tmp_path: Path, n: int) -> tuple[Path, list[Path], str, str]:
    """A replay librarian spec, ``n`` notes workspaces, and two models: one repairs once."""
    spec = _spec(tmp_path, [VALID])
    workspaces = [_workspace(tmp_path / f"w{i:02d}") for i in range(n)]
    good = write_script(tmp_path / "good.jsonl", [VALID])
    repair = write_script(tmp_path / "repair.jsonl", [MALFORMED, VALID])
    return spec, workspaces, good, repair


def test_plan_is_the_cross_product_and_names_one_script_per_transport(tmp_path: Path) -> None:
    from toolwire.flows.batch import plan_batch

    items = plan_batch(
        [tmp_path / "a", tmp_path / "b", tmp_path / "a"],
        ["replay:s-{transport}.jsonl"],
        ["native", "xct"],
    )
    assert [(Path(i.workspace).name, i.transport) for i in items] == [
        ("a", "native"),
        ("a", "xct"),
        ("b", "native"),
        ("b", "xct"),
    ]
    assert [i.index for i in items] == [0, 1, 2, 3]
    # Relative replay paths are made absolute: workers may run elsewhere.
    assert items[1].model == f"replay:{Path.cwd() / 's-xct.jsonl'}"
    with pytest.raises(UsageError, match="pass --transports"):
        plan_batch([tmp_path], ["replay:s-{transport}.jsonl"])
    with pytest.raises(UsageError, match="at least one --workspace"):
        plan_batch([])


def test_runs_that_write_one_workspace_share_a_chain(tmp_path: Path) -> None:
    from toolwire.flows.batch import chain_items, plan_batch

    spec, (ws_a, ws_b), good, repair = librarian_inputs(tmp_path, 2)
    items = plan_batch([ws_a, ws_b], [good, repair])
    # Dry runs only read: each is its own chain and may run in parallel.
    assert [len(c) for c in chain_items(spec, items, dry_run=True)] == [1, 1, 1, 1]
    # Runs that apply changes to one workspace run one after another.
    writing = chain_items(spec, items, dry_run=False)
    assert [[i.index for i in c] for c in writing] == [[0, 1], [2, 3]]
    # A tool agent's tools write files: agent runs on one folder always chain.
    agents = plan_batch([ws_a], [AGENT_MODEL], ["native", "xct"])
    assert [len(c) for c in chain_items(AGENT_SPEC, agents, dry_run=True)] == [2]


def test_fifty_agent_runs_two_transports_two_worker_processes(tmp_path: Path) -> None:
    from toolwire.flows.batch import run_batch
    from toolwire.store import Store

    workspaces = []
    for i in range(25):
        ws = tmp_path / "ws" / f"s{i:02d}"
        shutil.copytree(SCRATCH, ws)
        workspaces.append(ws)
    db = tmp_path / "batch.duckdb"
    seen: list[int] = []
    result = run_batch(
        AGENT_SPEC,
        workspaces,
        models=[AGENT_MODEL],
        transports=["native", "xct"],
        db=db,
        task_runner="processes",
        max_workers=2,
        check=True,
        on_progress=lambda done, total, outcome: seen.append(done),
    )
    assert (result.planned, result.finished, result.lost) == (50, 50, 0), result.outcomes
    assert seen == list(range(1, 51))
    assert result.quality is not None and result.quality.ok, [
        f.summary() for f in result.quality.failures
    ]
    # Two worker processes, each with its own shard, merged then removed.
    assert len({o["worker"] for o in result.outcomes}) == 2
    assert len(result.merged_shards) == 2
    assert not (tmp_path / "batch.duckdb.shards").exists()
    store = Store(db)
    _, rows = store.query(
        "SELECT transport, status, count(*), count(DISTINCT flow_run_id) FROM runs "
        "WHERE batch_id = ? GROUP BY ALL ORDER BY transport",
        [result.batch_id],
    )
    assert rows == [("native", "ok", 25, 1), ("xct", "ok", 25, 1)]
    run_ids = {o["run_id"] for o in result.outcomes}
    _, stored = store.query("SELECT run_id FROM runs")
    assert {r[0] for r in stored} == run_ids and len(run_ids) == 50
    _, batch = store.query(
        "SELECT b.planned, b.finished, b.lost, b.quality_ok, b.flow_run_id = r.flow_run_id "
        "FROM batches b JOIN runs r USING (batch_id) LIMIT 1"
    )
    assert batch == [(50, 50, 0, True, True)]
    _, tools = store.query("SELECT count(DISTINCT run_id) FROM tool_calls")
    assert tools == [(50,)]
    # Every agent wrote its own index (runs on one folder ran one after another).
    assert all((ws / "index.md").is_file() for ws in workspaces)

    checked = toolwire("check-store", "--db", db)
    assert checked.returncode == 0, checked.stderr
    assert "ok    tool_calls.run_exists (" in checked.stdout

    broken = tmp_path / "broken.duckdb"
    shutil.copy(db, broken)
    _corrupt(broken, "UPDATE runs SET pack_hash = 'not-a-hash' WHERE transport = 'xct'")
    failed = toolwire("check-store", "--db", broken)
    assert failed.returncode == 1
    assert "FAIL  runs.pack_hash_is_64_hex: 25 of 50 rows" in failed.stderr
    assert "FAIL" not in failed.stdout and "Traceback" not in failed.stderr


def _corrupt(db: Path, sql: str) -> None:
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.execute(sql)
    finally:
        con.close()


def test_librarian_batch_from_the_cli_two_models_threads(tmp_path: Path) -> None:
    from toolwire.store import Store

    spec, workspaces, good, repair = librarian_inputs(tmp_path, 3)
    db = tmp_path / "cli.duckdb"
    args: list[str | Path] = ["batch", spec, "--models", f"{good},{repair}", "--db", db]
    for ws in workspaces:
        args += ["--workspace", ws]
    ran = toolwire(*args, "--dry-run", "--batch-id", "b-cli", "--check")
    assert ran.returncode == 0, ran.stderr
    assert "planned 6, finished 6 (0 Failed, 0 unchecked), lost 0; checks ok" in ran.stderr
    # Dry run: the notes are untouched.
    assert all(
        (ws / "bread.md").read_text(encoding="utf-8") == NOTES["bread.md"] for ws in workspaces
    )
    _, stats = Store(db).query(
        "SELECT model, turns, first_try_valid, repaired_turns FROM repair_stats ORDER BY model"
    )
    assert stats == [
        (str(tmp_path / "good.jsonl"), 3, 3, 0),
        (str(tmp_path / "repair.jsonl"), 3, 0, 3),
    ]
    _, checks = Store(db).query(
        "SELECT count(*), bool_and(success) FROM quality_checks WHERE batch_id = 'b-cli'"
    )
    from toolwire.store.quality import CHECKS

    assert checks == [(len(CHECKS), True)]


def test_a_missing_workspace_fails_before_any_run(tmp_path: Path) -> None:
    from toolwire.flows.batch import run_batch

    spec, (ws,), good, _ = librarian_inputs(tmp_path, 1)
    db = tmp_path / "none.duckdb"
    with pytest.raises(UsageError, match="is not a directory"):
        run_batch(spec, [ws, tmp_path / "nope"], models=[good], db=db)
    assert not db.exists()


def test_dask_needs_a_reachable_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolwire.flows.batch import make_task_runner

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with pytest.raises(UsageError, match="PREFECT_API_URL"):
        make_task_runner("dask", 2)
    with pytest.raises(UsageError, match="unknown task runner 'fibers'"):
        make_task_runner("fibers", 2)


def test_shards_merge_export_and_query_as_one_dataset(tmp_path: Path) -> None:
    from toolwire.flows.batch import BatchShared, execute_item, plan_batch
    from toolwire.store import Store
    from toolwire.store.sandbox import query_dataset_readonly as query_dataset
    from toolwire.store.shards import export_parquet, merge_stores

    spec, workspaces, good, repair = librarian_inputs(tmp_path, 2)
    shards = tmp_path / "shards"
    # Two "machines", each writing its own store file.
    outcomes = [
        execute_item(item, BatchShared(str(spec), str(shards / f"m{item.index % 2}.duckdb"), "b"))
        for item in plan_batch(workspaces, [good, repair])
    ]
    assert [o["status"] for o in outcomes] == ["ok"] * 4
    run_ids = sorted(o["run_id"] for o in outcomes)

    # A folder of shards queries as one store, analysis views included.
    cols, rows = query_dataset([shards], "SELECT run_id FROM run_summary ORDER BY run_id")
    assert cols == ["run_id"] and [r[0] for r in rows] == run_ids
    _, specs = query_dataset([shards], "SELECT count(*) FROM specs")
    assert specs == [(1,)]  # the same spec in both shards counts once

    # Parquet export of one shard plus the other shard file: still every run.
    counts = export_parquet(Store(shards / "m0.duckdb"), tmp_path / "pq")
    assert counts["runs"] == 2 and (tmp_path / "pq" / "runs.parquet").is_file()
    _, mixed = query_dataset(
        [tmp_path / "pq", shards / "m1.duckdb"],
        "SELECT model, turns, repaired_turns FROM repair_stats ORDER BY model",
    )
    assert mixed == [(str(tmp_path / "good.jsonl"), 2, 0), (str(tmp_path / "repair.jsonl"), 2, 2)]

    # Merging is idempotent, and a finished row replaces a 'running' one.
    stale = tmp_path / "stale.duckdb"
    shutil.copy(shards / "m0.duckdb", stale)
    _corrupt(stale, "UPDATE runs SET status = 'running', ended_at = NULL")
    target = Store(tmp_path / "merged.duckdb")
    merge_stores(target, [stale])
    first = merge_stores(target, [shards / "m0.duckdb", shards / "m1.duckdb"])
    again = merge_stores(target, [shards / "m0.duckdb", shards / "m1.duckdb"])
    assert first.rows["runs"] == 4 and again.total == 0
    _, merged = target.query("SELECT status, count(*) FROM runs GROUP BY status")
    assert merged == [("ok", 4)]
    _, attempts = target.query("SELECT count(*) FROM attempts")
    assert attempts == [(6,)]  # 1 + 2 per workspace
    with pytest.raises(UsageError, match="into itself"):
        merge_stores(target, [target.path])
