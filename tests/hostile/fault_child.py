"""A child process for the fault tests (tests/hostile/test_faults.py): it runs, the test kills it.

Test-only. Each mode writes an *acknowledgement log* (one line per event,
appended with ``os.write`` on an O_APPEND descriptor, so a line is in the
kernel the moment the call returns and survives SIGKILL):

- ``attempt <run_id> <turn> <attempt> <sha256 of raw text>``: written right
  AFTER ``Store.record_attempt`` returned, i.e. the store acknowledged it.
  After a kill, every such line must be found in the store ("rows lost" = 0).
- ``call <n>``: written right before the n-th model call.
- ``stalled <n>``: the n-th call is stalling (``FAULT_KILL=slow_call:n``): the
  parent kills us while it is in flight.

Modes:

``cli LOG -- ARGS...``
    ``toolwire ARGS...`` in this process, with the log hooks above and an
    optional kill point chosen by ``FAULT_KILL``: ``journal_write:J`` (SIGKILL
    after the J-th durable write of the journal: mid-journal),
    ``state:applying`` (after the journal is complete, before the first note:
    k = 0; any other state likewise, e.g. ``state:applied``), ``slow_call:N``
    (stall the N-th model call). Kills after k >= 1 note writes use the
    journal's own hook, ``TOOLWIRE_TEST_CRASH_AFTER_WRITES``.
``store-loop DB LOG SEED``
    Record runs and attempts of random sizes in a loop, forever (until killed).
``store-fill DB LOG``
    Record 64 KB attempts until the store's disk is full; print the error that
    stopped it as JSON (type, message) and exit 0.
``hold-store DB READY SECONDS (toolwire|raw)``
    Hold the store file for SECONDS: a toolwire session (flock + DuckDB lock),
    or a raw DuckDB connection with an open transaction (like the duckdb CLI);
    touch READY once it is held.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

_LOG_FD: int | None = None


def log(line: str) -> None:
    """Append one line to the acknowledgement log (atomic append, no Python buffer)."""
    assert _LOG_FD is not None
    os.write(_LOG_FD, (line + "\n").encode("utf-8"))


def open_log(path: str) -> None:
    global _LOG_FD
    _LOG_FD = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def hook_store_acks() -> None:
    """Log every attempt the store acknowledged, right after the write returned."""
    from toolwire.store.store import Store

    real = Store.record_attempt

    def record_attempt(self: Any, run_id: str, attempt: Any) -> None:
        real(self, run_id, attempt)
        log(f"attempt {run_id} {attempt.turn} {attempt.attempt} {sha(attempt.raw_text)}")

    Store.record_attempt = record_attempt  # type: ignore[method-assign]


def hook_model_calls(stall_at: int | None) -> None:
    """Log every model call before it is made; stall the ``stall_at``-th one."""
    from toolwire.providers.openai_compat import OpenAIProvider
    from toolwire.providers.replay import ReplayProvider

    calls = [0]
    for cls in (ReplayProvider, OpenAIProvider):
        real = cls.complete

        def complete(self: Any, request: Any, _real: Any = real) -> Any:
            calls[0] += 1
            log(f"call {calls[0]}")
            if calls[0] == stall_at:
                log(f"stalled {calls[0]}")
                time.sleep(3600)  # the parent kills us while this call is in flight
            return _real(self, request)

        cls.complete = complete  # type: ignore[method-assign]


def hook_journal_kill(point: str) -> None:
    """Kill points inside the journal that its own crash hook does not reach."""
    from toolwire.librarian.journal import write_ahead as journal

    if point.startswith("journal_write:"):
        limit = int(point.split(":", 1)[1])
        real_write = journal._write_durable
        count = [0]

        def write_durable(fs: Any, rel: str, data: bytes) -> None:
            real_write(fs, rel, data)
            if "journal" in rel.split("/"):
                count[0] += 1
                if count[0] == limit:
                    die()

        journal._write_durable = write_durable  # type: ignore[assignment]
    elif point.startswith("state:"):  # right after the journal records that state
        target = point.split(":", 1)[1]
        real_state = journal._set_state

        def set_state(fs: Any, jdir: str, state: str, detail: str | None = None) -> None:
            real_state(fs, jdir, state, detail)
            if state == target:
                die()

        journal._set_state = set_state  # type: ignore[assignment]


def mode_cli(log_path: str, args: list[str]) -> None:
    open_log(log_path)
    point = os.environ.get("FAULT_KILL", "")
    hook_store_acks()
    stall = int(point.split(":", 1)[1]) if point.startswith("slow_call:") else None
    hook_model_calls(stall)
    if point.startswith(("journal_write:", "state:")):
        hook_journal_kill(point)
    from toolwire.cli import main

    sys.argv = ["toolwire", *args]
    main()


# Content hashes as real runs have them (check-store expects stored, 64-hex hashes).
_SPEC_HASH = hashlib.sha256(b"fault-loop spec").hexdigest()
_PACK_HASH = hashlib.sha256(b"fault-loop pack").hexdigest()


def _record_spec_and_pack(store: Any) -> None:
    store.record_spec(_SPEC_HASH, "fault-loop", "1", "name: fault-loop\n", "{}")
    store.record_pack(_PACK_HASH, "{}", {})


def _run_row(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "spec_hash": _SPEC_HASH,
        "pack_hash": _PACK_HASH,
        "spec_name": "fault-loop",
        "job": "librarian",
        "transport": "xml_attrless",
        "provider": "replay",
        "model": "loop",
    }


def _attempt(rng: random.Random, turn: int, number: int) -> Any:
    from toolwire.domain import Attempt

    size = rng.choice([40, 400, 4_000, 40_000, 200_000])
    text = "".join(rng.choice("abcdefgh <>/\n") for _ in range(64)) * (size // 64 + 1)
    return Attempt(
        turn=turn, attempt=number, kind="initial" if number == 0 else "repair",
        request_id=f"req_{turn}", prompt=[{"role": "user", "content": "x" * 100}],
        raw_text=text[:size], parse_ok=number > 0, error_code=None if number else "X",
        error_codes=(), input_tokens=10, output_tokens=size // 4, latency_ms=1.0,
        finish_reason="stop", started_at=time.time(),
    )  # fmt: skip


def mode_store_loop(db: str, log_path: str, seed: int) -> None:
    from toolwire.store import Store

    open_log(log_path)
    rng = random.Random(seed)
    store = Store(db, lock_timeout_s=30)
    _record_spec_and_pack(store)
    log("ready")
    n = 0
    while True:
        run_id = f"loop-{seed}-{n:05d}"
        store.start_run(_run_row(run_id))
        for number in range(rng.randint(1, 3)):  # 1 + at most 2 repairs
            attempt = _attempt(rng, 0, number)
            store.record_attempt(run_id, attempt)
            log(f"attempt {run_id} 0 {number} {sha(attempt.raw_text)}")
        store.finish_run(
            run_id, status="ok", error_code=None, error_message=None, turns=1,
            operations=[], tool_calls=[], report_markdown="# report\n" * rng.randint(1, 500),
        )  # fmt: skip
        log(f"finished {run_id}")
        n += 1


def mode_store_fill(db: str, log_path: str) -> None:
    from toolwire.store import Store

    open_log(log_path)
    rng = random.Random(7)
    store = Store(db, lock_timeout_s=5)
    outcome: dict[str, Any] = {"type": None, "message": None, "acknowledged": 0}
    try:
        _record_spec_and_pack(store)
        store.start_run(_run_row("fill"))
        for number in range(100_000):
            attempt = _attempt(rng, number, 0)
            attempt = dataclasses.replace(attempt, raw_text=os.urandom(32_768).hex())
            store.record_attempt("fill", attempt)
            log(f"attempt fill {number} 0 {sha(attempt.raw_text)}")
            outcome["acknowledged"] += 1
    except Exception as exc:  # noqa: BLE001 - the point is to report whatever it was
        outcome.update(
            type=type(exc).__name__,
            module=type(exc).__module__,
            code=getattr(exc, "code", None),
            message=str(exc)[:500],
        )
    print(json.dumps(outcome), flush=True)


def mode_hold_store(db: str, ready: str, seconds: float, how: str) -> None:
    if how == "raw":
        import duckdb

        con = duckdb.connect(db)
        con.execute("BEGIN TRANSACTION")
        con.execute("SELECT count(*) FROM runs").fetchall()
        Path(ready).touch()
        time.sleep(seconds)
        con.execute("ROLLBACK")
        con.close()
        return
    from toolwire.store import Store

    store = Store(db, lock_timeout_s=30)
    with store.session():
        store.schema_version()  # the file is open (and migrated) from here on
        Path(ready).touch()
        time.sleep(seconds)


def main(argv: list[str]) -> None:
    mode, rest = argv[0], argv[1:]
    if mode == "cli":
        sep = rest.index("--")
        mode_cli(rest[0], rest[sep + 1 :])
    elif mode == "store-loop":
        mode_store_loop(rest[0], rest[1], int(rest[2]))
    elif mode == "store-fill":
        mode_store_fill(rest[0], rest[1])
    elif mode == "hold-store":
        mode_hold_store(rest[0], rest[1], float(rest[2]), rest[3])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
