"""Load (#8 item 5): 1,000 runs through one store from concurrent writers; 10,000 notes.

Load A: three writer processes with three threads each run 1,000 real librarian
runs (replay provider, a fresh two-note workspace per run) into ONE DuckDB
file. Every writer reports what it wrote; the store must hold exactly that
(rows lost = 0), with the right statuses, views that compute, and the data
quality checks passing. What makes this fit the suite: a run holds the store
file from prepare_run to its end, and threads share the process's connection
(``toolwire.store.connection``); before that every write opened and closed the
file (bench/RESULTS.md figure 2).

Load B: one librarian run over 10,000 notes, batched 50 per request, in a child
process whose peak RSS is measured. Every request fits the context budget, every
note is offered exactly once, and every replayed operation ends with its
expected status or rejection code. Validation keeps one planned-workspace view
up to date per turn (job.validate_turn); it used to replay every earlier
turn's operations on every turn (O(turns^2)).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hostile.tally import Tally
from toolwire.memory.tokens import estimate_tokens
from toolwire.store import Store

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "load_child.py"
PACK = REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"

RUNS = 1_000
PROCESSES = 3
THREADS = 3
NOTES = 10_000
BATCH = 50
CONTEXT_WINDOW = 8192
MAX_TOKENS = 512

VALID = """<librarian_response>
<request_id>{{request_id}}</request_id>
<status>ok</status>
<summary>Retag the bread note and retitle the untitled one.</summary>
<operations>
<operation>
<operation_id>op_1</operation_id>
<kind>retag_note</kind>
<target_note_id>bread</target_note_id>
<title>Sourdough starter</title>
<body_markdown>cooking</body_markdown>
<reason>The note is about baking bread.</reason>
<confidence>0.9</confidence>
</operation>
<operation>
<operation_id>op_2</operation_id>
<kind>retitle_note</kind>
<target_note_id>misc/vacuum</target_note_id>
<title>Postgres VACUUM basics</title>
<body_markdown>-</body_markdown>
<reason>The note has no title.</reason>
<confidence>0.8</confidence>
</operation>
</operations>
<warnings></warnings>
</librarian_response>"""
MALFORMED = "<librarian_response><status ok='1'>ok</status></librarian_response>"

# name -> (replay script, expected status, error code, attempts, operations applied)
VARIANTS: dict[str, tuple[list[str], str, str | None, int, int]] = {
    "valid": ([VALID], "ok", None, 1, 2),
    "repair": ([MALFORMED, VALID], "ok", None, 2, 2),
    "failed": ([MALFORMED] * 3, "Failed", "LIBRARIAN_PROTOCOL_INVALID", 3, 0),
}
# Seven in ten runs valid first time, two repaired once, one fails after two repairs.
MIX = ["valid"] * 7 + ["repair"] * 2 + ["failed"]


def _spec(path: Path, *, batch_size: int, max_operations: int) -> Path:
    path.write_text(
        f"""name: librarian-load
version: "1"
transport: xml_attrless
model:
  name: replay:unused.jsonl
  constrain: none
  max_tokens: {MAX_TOKENS}
prompt_pack: {PACK}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: {batch_size}
  context_window_tokens: {CONTEXT_WINDOW}
  max_operations: {max_operations}
  # Every note of the load is offered and every answer applied: no cap on notes written.
  max_changes: 100000
  allowed_kinds: [retag_note, retitle_note, defer]
""",
        encoding="utf-8",
    )
    return path


def _script(path: Path, texts: list[str]) -> str:
    usage = {"finish_reason": "stop", "input_tokens": 120, "output_tokens": 60}
    path.write_text("".join(json.dumps({"text": t} | usage) + "\n" for t in texts), "utf-8")
    return f"replay:{path}"


def _toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


# -- Load A: 1,000 runs, one store, processes x threads --------------------------------------


def _start_writers(tmp_path: Path, db: Path, spec: Path) -> list[subprocess.Popen[str]]:
    variants = {name: _script(tmp_path / f"{name}.jsonl", v[0]) for name, v in VARIANTS.items()}
    mix = [{"name": name, "model": variants[name]} for name in MIX]
    writers = []
    for w in range(PROCESSES):
        job = {
            "db": str(db),
            "spec": str(spec),
            "root": str(tmp_path / f"writer{w}"),
            "variants": mix,
            "threads": THREADS,
            "runs": list(range(w, RUNS, PROCESSES)),
        }
        job_path = tmp_path / f"writer{w}.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        writers.append(
            subprocess.Popen(
                [sys.executable, str(CHILD), str(job_path)],
                stdout=subprocess.PIPE,
                stderr=(tmp_path / f"writer{w}.stderr").open("w"),
                text=True,
            )
        )
    return writers


def _count(store: Store, sql: str, params: list[Any] | None = None) -> int:
    return int(store.query(sql, params)[1][0][0])


def test_a_thousand_runs_through_one_store_lose_nothing(tmp_path: Path, tally: Tally) -> None:
    area = "load: 1,000 runs"
    db = tmp_path / "load.duckdb"
    spec = _spec(tmp_path / "spec.yaml", batch_size=10, max_operations=5)
    started = time.perf_counter()
    writers = _start_writers(tmp_path, db, spec)
    reported: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for w in writers:
        out, _ = w.communicate(timeout=540)
        for line in out.splitlines():
            row = json.loads(line)
            (summaries if row.get("summary") else reported).append(row)
    seconds = time.perf_counter() - started

    store = Store(db)
    by_run = {r["run_id"]: r for r in reported}
    _, rows = store.query(
        "SELECT run_id, status, error_code, attempts, ops_applied FROM run_summary"
    )
    stored = {r[0]: r[1:] for r in rows}
    wrote = {
        "runs": len(reported),
        "attempts": sum(r["attempts"] for r in reported),
        "operations": sum(r["operations"] for r in reported),
    }
    held = {
        "runs": _count(store, "SELECT count(*) FROM runs"),
        "attempts": _count(store, "SELECT count(*) FROM attempts"),
        "operations": _count(store, "SELECT count(*) FROM operations"),
    }
    lost = sum(max(0, wrote[k] - held[k]) for k in wrote) + (RUNS - len(reported))
    tally.add(area, "runs under load", len(reported))
    tally.add(area, "rows lost", lost)
    tally.add(area, "rows written", sum(held.values()))
    tally.add(area, "writers", PROCESSES * THREADS)
    tally.add(area, "peak RSS MB", max(s["peak_rss_mb"] for s in summaries))
    tally.note(
        area,
        f"{len(reported)} runs by {PROCESSES} processes x {THREADS} threads in {seconds:.0f} s "
        f"({len(reported) / seconds:.1f} runs/s); the store file was opened "
        f"{sum(s['opens'] for s in summaries)} times in all",
    )

    assert [w.returncode for w in writers] == [0] * PROCESSES, [s["errors"] for s in summaries]
    assert len(by_run) == len(reported) == RUNS  # every run reported once, ids unique
    assert sorted(r["index"] for r in reported) == list(range(RUNS))
    assert held == wrote and lost == 0
    # Each run's row says what its writer saw, and what its variant must give.
    for run_id, r in by_run.items():
        _, status, code, attempts, applied = VARIANTS[r["variant"]]
        assert (r["status"], r["error_code"], r["attempts"], r["applied"]) == (
            status,
            code,
            attempts,
            applied,
        )
        assert stored[run_id] == (status, code, attempts, applied)
    assert _count(store, "SELECT count(*) FROM runs WHERE status = 'running'") == 0
    assert _count(store, "SELECT count(*) FROM reports") == RUNS
    # The views compute over all of it.
    _, repair = store.query("SELECT sum(turns), sum(repairs), sum(failed_turns) FROM repair_stats")
    n = Counter(MIX[i % len(MIX)] for i in range(RUNS))
    assert repair == [(RUNS, n["repair"] + 2 * n["failed"], n["failed"])]
    assert store.query("SELECT count(*) FROM tool_stats")[1] == [(0,)]  # librarian: no tools
    checked = _toolwire("check-store", "--db", db)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# -- Load B: 10,000 notes in one workspace -----------------------------------------------------

FOLDERS = ("inbox", "work/db", "work/ops", "home/kitchen", "travel")


def _write_notes(root: Path) -> list[str]:
    """10,000 small notes (~300 bytes) in five folders, some with front matter and links."""
    ids = []
    for i in range(NOTES):
        folder = FOLDERS[i % len(FOLDERS)]
        rel = f"{folder}/note-{i:05d}.md"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        link = f"See [the previous note](note-{i - len(FOLDERS):05d}.md).\n" if i % 7 == 0 else ""
        head = f"---\ntitle: Note {i}\ntags: [databases]\n---\n" if i % 3 == 0 else ""
        body = (
            f"# Note {i}\n\nA small note about item {i} in {folder}: what was done, why, and "
            "what to check next time. It stays short so ten thousand fit in a workspace.\n"
        )
        path.write_text(head + body + link, encoding="utf-8")
        ids.append(rel[:-3])
    return ids


def test_ten_thousand_notes_batched_with_bounded_memory(tmp_path: Path, tally: Tally) -> None:
    area = "load: 10,000 notes"
    workspace = tmp_path / "notes"
    ids = _write_notes(workspace)
    spec = _spec(tmp_path / "spec.yaml", batch_size=BATCH, max_operations=5)
    job = {
        "spec": str(spec),
        "workspace": str(workspace),
        "db": str(tmp_path / "store.duckdb"),
        "script": str(tmp_path / "script.jsonl"),
        "out": str(tmp_path / "out.json"),
    }
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, str(CHILD), "--notes", str(tmp_path / "job.json")],
        capture_output=True,
        text=True,
        timeout=540,
    )
    seconds = time.perf_counter() - started
    assert child.returncode == 0, child.stderr[-4000:]
    out = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    requests, outcomes = out["requests"], out["outcomes"]
    store = Store(job["db"])
    stored_ops = _count(store, "SELECT count(*) FROM operations WHERE run_id = ?", [out["run_id"]])
    stored_attempts = _count(
        store, "SELECT count(*) FROM attempts WHERE run_id = ?", [out["run_id"]]
    )
    tally.add(area, "notes", NOTES)
    tally.add(area, "requests", len(requests))
    tally.add(area, "operations validated", len(outcomes))
    tally.add(area, "rows lost", (len(outcomes) - stored_ops) + (out["attempts"] - stored_attempts))
    tally.add(area, "peak RSS MB", round(out["peak_rss_mb"]))
    tally.note(
        area,
        f"{NOTES} notes, {len(requests)} requests of <= {BATCH}: {seconds:.0f} s in all "
        f"(batching {out['plan_seconds']} s, the run {out['run_seconds']} s), "
        f"peak RSS {out['peak_rss_mb']:.0f} MB",
    )

    assert out["status"] == "ok" and out["turns"] == len(requests) == NOTES // BATCH
    # Every note offered exactly once.
    offered = [nid for r in requests for nid in r["note_ids"]]
    assert len(offered) == NOTES and set(offered) == set(ids)
    # Every request fits the window with room for the answer (the batching estimate).
    for r in requests:
        assert len(r["note_ids"]) <= BATCH
        assert (r["chars"] + 3) // 4 + MAX_TOKENS <= CONTEXT_WINDOW
    assert estimate_tokens("x" * 8) == 2  # the estimate the bound above spells out
    # Every replayed operation validated: applied, rejected with its code, or deferred.
    assert len(outcomes) == 4 * len(requests)
    expected = {
        ("retag_note", "applied", None),
        ("retitle_note", "applied", None),
        ("retag_note", "rejected", "UNKNOWN_TOPIC:astrology"),
        ("defer", "deferred", "DEFERRED_BY_MODEL"),
    }
    seen = Counter((o["kind"], o["status"], o["code"]) for o in outcomes)
    assert set(seen) == expected and set(seen.values()) == {len(requests)}
    assert stored_ops == len(outcomes) and stored_attempts == out["attempts"] == len(requests)
    # The applied ones are on disk.
    for o in outcomes:
        if o["kind"] == "retag_note" and o["status"] == "applied":
            text = (workspace / f"{o['target']}.md").read_text(encoding="utf-8")
            assert "cooking" in text, o
    # Memory: the workspace is ~3 MB of text; the interpreter with duckdb, pyarrow, yaml
    # and lxml loaded is ~200 MB before any note is read (load A's writers peak at
    # ~200 MB on two-note workspaces). 400 MB leaves room for per-note objects and the
    # planned views, and still fails on anything that keeps a copy per turn.
    assert out["peak_rss_mb"] < 400
