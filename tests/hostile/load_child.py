"""A writer process for the load tests: librarian runs on threads, into one shared store.

Run as ``python load_child.py JOB.json``. The job names the store, the spec, the
replay scripts and the runs this process owns; each of ``threads`` threads takes
runs from a shared queue, builds a fresh two-note workspace and runs the real
librarian (``prepare_run`` + ``run_librarian``, replay provider) into the store.
Prints one JSON line per run, then one summary line: what this writer says it
wrote, for the parent to compare with what the store holds.

The second mode, ``python load_child.py --notes JOB.json``, runs ONE librarian
run over a big workspace and reports its requests and peak RSS (load B).
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from rss import peak_rss_bytes  # tests/hostile/rss.py: this script's folder is on sys.path

NOTES = {
    "bread.md": "---\ntitle: Sourdough starter\ntags: [databases]\n---\n# Sourdough starter\n\n"
    "Feed the starter twice a day with equal flour and water.\n",
    "misc/vacuum.md": "VACUUM reclaims space held by dead tuples.\n\nRun it after bulk deletes.\n",
}


def _workspace(root: Path) -> Path:
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _one_run(job: dict[str, Any], index: int) -> dict[str, Any]:
    from toolwire.librarian.job import prepare_run, run_librarian

    variant = job["variants"][index % len(job["variants"])]
    ws = _workspace(Path(job["root"]) / f"ws{index:05d}")
    started = time.perf_counter()
    ctx = prepare_run(job["spec"], workspace=ws, db=job["db"], model=variant["model"])
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    return {
        "index": index,
        "variant": variant["name"],
        "run_id": result.run_id,
        "status": result.status,
        "error_code": result.error_code,
        "attempts": len(result.attempts),
        "operations": len(result.outcomes),
        "applied": sum(1 for o in result.outcomes if o.status == "applied"),
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


def run_writer(job: dict[str, Any]) -> int:
    todo: queue.Queue[int] = queue.Queue()
    for index in job["runs"]:
        todo.put(index)
    lock = threading.Lock()
    errors: list[str] = []

    def worker() -> None:
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            try:
                line = json.dumps(_one_run(job, index))
            except BaseException:  # reported, counted as lost by the parent
                with lock:
                    errors.append(f"run {index}: {traceback.format_exc()}")
                continue
            with lock:
                print(line, flush=True)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(job["threads"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from toolwire.store import Store

    summary = {
        "summary": True,
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 2),
        "opens": Store(job["db"]).opens,
        "peak_rss_mb": peak_rss_bytes() / 2**20,
    }
    print(json.dumps(summary), flush=True)
    return 1 if errors else 0


def _envelope(note_ids: list[str]) -> str:
    """A reply to one request: retag, retitle, an unknown topic, a defer (4 operations)."""
    first, second, third, fourth = note_ids[:4]
    ops = [
        ("retag_note", first, "-", "cooking"),
        ("retitle_note", second, f"Renamed {second}", "-"),
        ("retag_note", third, "-", "astrology"),  # not in the taxonomy: UNKNOWN_TOPIC
        ("defer", fourth, "-", "-"),
    ]
    body = "".join(
        f"<operation>\n<operation_id>op_{k}</operation_id>\n<kind>{kind}</kind>\n"
        f"<target_note_id>{target}</target_note_id>\n<title>{title}</title>\n"
        f"<body_markdown>{text}</body_markdown>\n<reason>load test</reason>\n"
        "<confidence>0.9</confidence>\n</operation>\n"
        for k, (kind, target, title, text) in enumerate(ops, 1)
    )
    return (
        "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
        f"<summary>load</summary>\n<operations>\n{body}</operations>\n<warnings></warnings>\n"
        "</librarian_response>"
    )


def run_notes(job: dict[str, Any]) -> int:
    """Load B: one run over a big workspace; report its requests, outcomes and peak RSS.

    The replay script is written here, from the batches the run will build (they
    are deterministic), so every reply names notes of its own request.
    """
    from toolwire.librarian.job import build_requests, load_context, prepare_run, run_librarian
    from toolwire.librarian.notes.workspace import Workspace

    started = time.perf_counter()
    probe = load_context(job["spec"], workspace=job["workspace"])
    requests = build_requests(probe, Workspace.load(Path(job["workspace"])))
    script = Path(job["script"])
    usage = {"finish_reason": "stop", "input_tokens": 1000, "output_tokens": 200}
    script.write_text(
        "".join(json.dumps({"text": _envelope(list(r.note_ids))} | usage) + "\n" for r in requests),
        encoding="utf-8",
    )
    planned = time.perf_counter()
    ctx = prepare_run(
        job["spec"], workspace=job["workspace"], db=job["db"], model=f"replay:{script}"
    )
    result = run_librarian(ctx)
    ctx.provider.close()
    out = {
        "run_id": result.run_id,
        "status": result.status,
        "error_code": result.error_code,
        "turns": result.turns,
        "attempts": len(result.attempts),
        "requests": [{"note_ids": list(r.note_ids), "chars": _chars(r)} for r in requests],
        "outcomes": [
            {
                "turn": o.turn,
                "kind": o.operation.kind,
                "target": o.operation.target,
                "status": o.status,
                "code": o.code,
            }
            for o in result.outcomes
        ],
        "plan_seconds": round(planned - started, 2),
        "run_seconds": round(time.perf_counter() - planned, 2),
        "peak_rss_mb": peak_rss_bytes() / 2**20,
    }
    Path(job["out"]).write_text(json.dumps(out), encoding="utf-8")
    return 0 if result.ok else 1


def _chars(request: Any) -> int:
    return sum(len(str(m.get("content") or "")) for m in request.messages)


if __name__ == "__main__":
    if sys.argv[1] == "--notes":
        sys.exit(run_notes(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))))
    sys.exit(run_writer(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
