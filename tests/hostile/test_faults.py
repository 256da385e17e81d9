"""#8 item 4, faults: real SIGKILLs, a real full disk, a real dead server, a second process.

Every fault is followed by the same three checks:

1. notes: every note in the workspace is byte-identical to its old or its new
   version (``check_notes``);
2. store: every attempt the child logged as acknowledged (a line written right
   after ``Store.record_attempt`` returned, see ``fault_child.py``) is in the
   store with the same raw text ("rows lost" = logged - found, must be 0);
3. recovery: the next ``toolwire run`` finishes the journal and marks the dead
   run 'Failed' (``RUN_INTERRUPTED``), ``toolwire undo`` brings the notes back.

Runs go through ``toolwire run --no-prefect`` in a child process (the whole
CLI path; the Prefect path would leave its temporary server orphaned when the
child is killed). The model is the ``replay:`` provider, except for the dead
server case, which uses the real llama.cpp server through ``openai:``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from hostile.scale import LONG
from hostile.tally import Tally

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHILD = HERE / "fault_child.py"
DATA = REPO / "tests" / "data" / "hostile" / "faults"

VALID = (DATA / "valid.xml").read_text(encoding="utf-8")
MALFORMED = (DATA / "malformed.xml").read_text(encoding="utf-8")
NOTES: dict[str, str] = json.loads((DATA / "notes.json").read_text(encoding="utf-8"))
CHANGED = ("bread.md", "misc/vacuum.md")  # the notes VALID changes; the others stay as they are

SPEC = """name: librarian-faults
version: "1"
transport: xml_attrless
model: replay:{script}
prompt_pack: {pack}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: 10
  context_window_tokens: {window}
  max_operations: 5
  allowed_kinds: [retag_note, retitle_note, defer]
"""


# ---------------------------------------------------------------- helpers


def write_workspace(root: Path, notes: dict[str, str] | None = None) -> Path:
    for rel, text in (notes or NOTES).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_spec(tmp: Path, answers: list[str], *, name: str = "spec", window: int = 8192) -> Path:
    script = tmp / f"{name}.jsonl"
    script.write_text(
        "".join(json.dumps({"text": t, "finish_reason": "stop"}) + "\n" for t in answers), "utf-8"
    )
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        SPEC.format(
            script=script.name,
            pack=REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small",
            window=window,
        ),
        encoding="utf-8",
    )
    return spec


def digest(root: Path) -> dict[str, str]:
    """sha256 of every visible file outside .toolwire (a leftover temp file would show)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if ".toolwire" in rel.parts or not path.is_file():
            continue
        out[rel.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWIRE_", "FAULT_"))}
    env.update(extra)
    return env


def child_cmd(log: Path, *args: str | Path) -> list[str]:
    return [sys.executable, str(CHILD), "cli", str(log), "--", *map(str, args)]


def run_cli(log: Path, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``toolwire ARGS`` in a child with the acknowledgement hooks; waits for it."""
    return subprocess.run(
        child_cmd(log, *args), capture_output=True, text=True, env=child_env(**env), timeout=600
    )


def toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True, text=True, env=child_env(), timeout=300,
    )  # fmt: skip


def run_args(spec: Path, ws: Path, db: Path) -> list[str | Path]:
    return ["run", spec, "--workspace", ws, "--db", db, "--no-prefect"]


def wait_for_line(log: Path, prefix: str, proc: subprocess.Popen[bytes], limit_s: float) -> None:
    """Wait until the child logs a line starting with ``prefix`` (hang guard: ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if log.exists() and any(
            line.startswith(prefix) for line in log.read_text("utf-8").splitlines()
        ):
            return
        if proc.poll() is not None:
            raise AssertionError(f"child exited {proc.returncode} before logging {prefix!r}")
        time.sleep(0.02)
    raise AssertionError(f"child did not log {prefix!r} within {limit_s} s")


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@contextmanager
def open_db(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A plain DuckDB connection (replays the WAL a killed writer left), closed after use."""
    con = duckdb.connect(str(db))
    try:
        yield con
    finally:
        con.close()


def logged_attempts(log: Path) -> list[tuple[str, int, int, str]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text("utf-8").splitlines():
        if line.startswith("attempt "):
            _, run_id, turn, attempt, sha = line.split()
            out.append((run_id, int(turn), int(attempt), sha))
    return out


def check_acked(tally: Tally, area: str, db: Path, log: Path) -> int:
    """Check 2: every acknowledged attempt is in the store, same raw text. Returns how many."""
    acked = logged_attempts(log)
    with open_db(db) as con:
        rows = con.execute("SELECT run_id, turn, attempt, raw_text FROM attempts").fetchall()
    stored = {(r, t, a, hashlib.sha256(text.encode("utf-8")).hexdigest()) for r, t, a, text in rows}
    lost = [a for a in acked if a not in stored]
    tally.add(area, "attempts acknowledged", len(acked))
    tally.add(area, "rows lost", len(lost))
    assert not lost, f"acknowledged attempts missing from the store: {lost}"
    return len(acked)


def check_notes(tally: Tally, area: str, ws: Path, old: dict[str, str], new: dict[str, str]):
    """Check 1: every note is its old or its new bytes, and no other file appeared."""
    now = digest(ws)
    tally.add(area, "notes checked", len(now))
    assert set(now) == set(old), f"files appeared or vanished: {set(now) ^ set(old)}"
    torn = [p for p, h in now.items() if h not in (old[p], new[p])]
    assert not torn, f"notes neither old nor new: {torn}"
    return now


def run_row(db: Path, run_id: str) -> tuple[str, str | None]:
    with open_db(db) as con:
        row = con.execute(
            "SELECT status, error_code FROM runs WHERE run_id = ?", [run_id]
        ).fetchone()
    assert row is not None, f"run {run_id} is not in the store"
    return row[0], row[1]


def run_ids(db: Path) -> list[str]:
    with open_db(db) as con:
        return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]


def journal_state(ws: Path, run_id: str) -> str | None:
    state = ws / ".toolwire" / "journal" / run_id / "state.json"
    return json.loads(state.read_text("utf-8"))["state"] if state.exists() else None


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, str]]:
    """(old, new) digests of the workspace: before and after one uninterrupted run."""
    tmp = tmp_path_factory.mktemp("reference")
    ws = write_workspace(tmp / "notes")
    old = digest(ws)
    done = run_cli(tmp / "log", *run_args(write_spec(tmp, [VALID]), ws, tmp / "s.duckdb"))
    assert done.returncode == 0, done.stderr
    new = digest(ws)
    assert {p for p in old if old[p] != new[p]} == set(CHANGED)
    return old, new


def recover_and_undo(
    tally: Tally, area: str, tmp: Path, ws: Path, db: Path, crashed: str, old: dict[str, str]
) -> list[str]:
    """Check 3: a re-run finishes the journal and settles the dead run; undo restores old.

    Returns the runs that were undone (those whose journal is 'applied').
    """
    rerun = run_cli(tmp / "rerun.log", *run_args(write_spec(tmp, [VALID], name="rerun"), ws, db))
    assert rerun.returncode == 0, rerun.stderr
    assert "Traceback" not in rerun.stderr
    assert run_row(db, crashed) == ("Failed", "RUN_INTERRUPTED")  # honest: not ok, not running
    tally.add(area, "runs recovered")
    undone = []
    for run_id in reversed(run_ids(db)):
        if (ws / ".toolwire" / "journal" / run_id).is_dir() and journal_state(
            ws, run_id
        ) == "applied":
            done = toolwire("undo", run_id, "--workspace", ws, "--db", db)
            assert done.returncode == 0, done.stderr
            undone.append(run_id)
    assert digest(ws) == old
    return undone


# ---------------------------------------------------------------- 1. kill -9 during apply

# Where the child dies: inside the journal write, after it (k = 0), after k note writes.
APPLY_POINTS = [
    ("journal_write:1", {}),  # after the first journal copy
    ("journal_write:5", {}),  # after the manifest, before the state file
    ("state:applying", {}),  # k = 0: journal complete, no note written
    ("", {"TOOLWIRE_TEST_CRASH_AFTER_WRITES": "1"}),  # k = 1 of 2
    ("", {"TOOLWIRE_TEST_CRASH_AFTER_WRITES": "2"}),  # k = 2 of 2, before 'applied'
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("point", "extra"), APPLY_POINTS, ids=lambda v: str(v) or "-")
def test_kill_during_apply_leaves_old_or_new_and_recovers(
    tmp_path: Path, tally: Tally, versions: tuple[dict, dict], point: str, extra: dict[str, str]
) -> None:
    area = "fault: kill -9 during apply"
    old, new = versions
    ws, db, log = write_workspace(tmp_path / "notes"), tmp_path / "s.duckdb", tmp_path / "log"
    env = dict(extra, FAULT_KILL=point) if point else dict(extra)
    killed = run_cli(log, *run_args(write_spec(tmp_path, [VALID]), ws, db), **env)
    tally.add(area, "faults injected")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    now = check_notes(tally, area, ws, old, new)
    assert check_acked(tally, area, db, log) == 1  # the one answer was stored before apply
    (crashed,) = run_ids(db)
    assert run_row(db, crashed) == ("running", None)
    state = journal_state(ws, crashed)
    k = int(extra.get("TOOLWIRE_TEST_CRASH_AFTER_WRITES", "0"))
    assert state == (None if point.startswith("journal_write") else "applying")
    assert sum(now[p] == new[p] for p in CHANGED) == k  # exactly k notes were replaced
    undone = recover_and_undo(tally, area, tmp_path, ws, db, crashed, old)
    # An interrupted apply is rolled forward, so it is the crashed run that undo restores;
    # a journal that never got a state was ignored and the re-run applied instead.
    assert (crashed in undone) is (state == "applying")
    assert len(undone) == 1


# ---------------------------------------------------------------- 2. kill -9 during store writes


@pytest.mark.timeout(300)
def test_kill_during_store_writes_loses_no_acknowledged_attempt(
    tmp_path: Path, tally: Tally
) -> None:
    area = "fault: kill -9 during store write"
    db = tmp_path / "loop.duckdb"
    seeds = range(1, 41 if LONG else 6)
    for seed in seeds:
        log = tmp_path / f"loop-{seed}.log"
        with (tmp_path / f"loop-{seed}.err").open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD), "store-loop", str(db), str(log), str(seed)],
                stdout=subprocess.DEVNULL, stderr=err, env=child_env(),
            )  # fmt: skip
        try:
            wait_for_line(log, "ready", proc, limit_s=120)
            time.sleep(random.Random(seed).uniform(0.3, 2.5))  # a random moment in the loop
        finally:
            sigkill(proc)
        tally.add(area, "faults injected")
        check_acked(tally, area, db, log)  # the file opens (WAL replay) and holds every ack
    with open_db(db) as con:  # every view computes over what the kills left
        for view in ("run_summary", "tool_stats", "repair_stats"):
            con.execute(f"SELECT count(*) FROM {view}").fetchall()
        runs, attempts = con.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM attempts)"
        ).fetchone()
    checked = toolwire("check-store", "--db", db, "--format", "json")
    assert "Traceback" not in checked.stderr
    report = json.loads(checked.stdout)
    failed = [r["expectation"] for r in report["results"] if not r["success"]]
    tally.note(area, f"{len(seeds)} kills; store holds {runs} runs, {attempts} attempts; "
               f"check-store failed expectations: {failed or 'none'}")  # fmt: skip
    assert checked.returncode == 0 and not failed, checked.stdout[-2000:]


# ---------------------------------------------------------------- 3. kill -9 during a repair


@pytest.mark.timeout(240)
def test_kill_during_repair_keeps_the_invalid_attempt(
    tmp_path: Path, tally: Tally, versions: tuple[dict, dict]
) -> None:
    area = "fault: kill -9 during repair"
    old, new = versions
    ws, db, log = write_workspace(tmp_path / "notes"), tmp_path / "s.duckdb", tmp_path / "log"
    spec = write_spec(tmp_path, [MALFORMED, VALID])
    proc = subprocess.Popen(
        child_cmd(log, *run_args(spec, ws, db)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=child_env(FAULT_KILL="slow_call:2"),  # the 2nd call is the repair: it stalls
    )  # fmt: skip
    try:
        wait_for_line(log, "stalled 2", proc, limit_s=180)
    finally:
        sigkill(proc)
    tally.add(area, "faults injected")
    assert check_notes(tally, area, ws, old, new) == old  # nothing applied
    assert check_acked(tally, area, db, log) == 1
    (crashed,) = run_ids(db)
    with open_db(db) as con:
        rows = con.execute(
            "SELECT kind, parse_ok, error_code, raw_text FROM attempts WHERE run_id = ?",
            [crashed],
        ).fetchall()
    assert rows == [("initial", False, "LIBRARIAN_PROTOCOL_INVALID", MALFORMED)]
    assert recover_and_undo(tally, area, tmp_path, ws, db, crashed, old) != [crashed]


# ---------------------------------------------------------------- 4. disk full

BIG = 150_000  # bytes of body per changed note: the journal holds two copies of each


def big_notes() -> dict[str, str]:
    filler = "Line of a long note that fills the disk quickly.\n" * (BIG // 50)
    return {rel: text + filler if rel in CHANGED else text for rel, text in NOTES.items()}


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@contextmanager
def small_disk(where: Path, size: str, tally: Tally, area: str) -> Iterator[Path]:
    """A real, small tmpfs at ``where`` (root with CAP_SYS_ADMIN); unmounted afterwards."""
    where.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        tally.note(area, f"tmpfs mount not permitted here: {mounted.stderr.strip()}")
        pytest.skip(f"needs `mount -t tmpfs` (root, CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    tally.note(area, f"mechanism: tmpfs of {size} mounted at the test's folder")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill_to(disk: Path, leave: int) -> Path:
    """Write a filler file so that ``leave`` bytes stay free on ``disk``."""
    filler = disk / "filler.bin"
    with filler.open("wb") as handle:
        handle.write(b"\0" * max(0, free_bytes(disk) - leave))
    return filler


def _page(n: int) -> int:
    return (n + 4095) // 4096 * 4096


@pytest.mark.timeout(240)
@pytest.mark.parametrize("where", ["note write", "journal write"])
def test_disk_full_during_apply_fails_cleanly_and_recovers(
    tmp_path: Path, tally: Tally, where: str
) -> None:
    area = f"fault: disk full during apply ({where})"
    notes = big_notes()
    ref = write_workspace(tmp_path / "ref", notes)  # old and new bytes, on an ordinary disk
    old = digest(ref)
    # A window that holds both big notes: one request, as with the small ones.
    spec = write_spec(tmp_path, [VALID], name="ref", window=400_000)
    done = run_cli(tmp_path / "ref.log", *run_args(spec, ref, tmp_path / "ref.duckdb"))
    assert done.returncode == 0, done.stderr
    new = digest(ref)
    journal_bytes = sum(_page(len((ref / p).read_bytes())) * 2 for p in CHANGED) + 16 * 4096
    with small_disk(tmp_path / "disk", "2m", tally, area) as disk:
        ws = write_workspace(disk / "notes", notes)
        db, log = tmp_path / "s.duckdb", tmp_path / "log"  # the store is on another disk
        # "note write": room for the journal, not for the first note's temp copy;
        # "journal write": not even room for the journal's first copy.
        filler = fill_to(disk, journal_bytes + 48 * 1024 if where == "note write" else 64 * 1024)
        spec = write_spec(tmp_path, [VALID], window=400_000)
        failed = run_cli(log, *run_args(spec, ws, db))
        tally.add(area, "faults injected")
        assert failed.returncode == 1, failed.stderr
        assert "Traceback" not in failed.stderr
        assert "WORKSPACE_ERROR" in failed.stderr and "no space left" in failed.stderr
        assert check_notes(tally, area, ws, old, new) == old  # rolled back: nothing applied
        assert check_acked(tally, area, db, log) == 1
        (run_id,) = run_ids(db)
        assert run_row(db, run_id) == ("Failed", "WORKSPACE_ERROR")
        jdir = ws / ".toolwire" / "journal" / run_id
        if where == "note write":
            assert journal_state(ws, run_id) == "aborted"  # rolled back, recorded as such
        else:
            assert not jdir.exists()  # the partial journal (our copies only) was removed
        filler.unlink()  # space frees: the same run now goes through
        rerun_spec = write_spec(tmp_path, [VALID], name="rerun", window=400_000)
        rerun = run_cli(tmp_path / "rerun.log", *run_args(rerun_spec, ws, db))
        assert rerun.returncode == 0, rerun.stderr
        assert digest(ws) == new
        rerun_id = run_ids(db)[-1]
        undone = toolwire("undo", rerun_id, "--workspace", ws, "--db", db)
        assert undone.returncode == 0, undone.stderr
        assert digest(ws) == old
        tally.add(area, "runs recovered")


@pytest.mark.timeout(240)
def test_store_disk_full_is_a_store_error_and_keeps_earlier_rows(
    tmp_path: Path, tally: Tally
) -> None:
    area = "fault: disk full on store write"
    with small_disk(tmp_path / "sdisk", "6m", tally, area) as disk:
        db, log = disk / "s.duckdb", tmp_path / "fill.log"
        filled = subprocess.run(
            [sys.executable, str(CHILD), "store-fill", str(db), str(log)],
            capture_output=True, text=True, env=child_env(), timeout=600,
        )  # fmt: skip
        tally.add(area, "faults injected")
        assert filled.returncode == 0, filled.stderr[-2000:]
        outcome = json.loads(filled.stdout.strip().splitlines()[-1])
        tally.note(area, f"{outcome['acknowledged']} attempts acknowledged, then "
                   f"{outcome['type']}: {outcome['message'][:160]}")  # fmt: skip
        assert outcome["acknowledged"] > 0
        assert outcome["type"] == "StoreError" and outcome["code"] == "STORE_ERROR", outcome
        # Space frees: the file opens, every acknowledged row is there, writes work again.
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        check_acked(tally, area, db, log)
        with open_db(db) as con:
            con.execute("SELECT count(*) FROM run_summary").fetchall()
        from toolwire.store import Store

        store = Store(db, lock_timeout_s=10)
        store.finish_run(
            "fill", status="Failed", error_code="STORE_ERROR", error_message="disk full",
            turns=1, operations=[], tool_calls=[], report_markdown=None,
        )  # fmt: skip
        assert store.get_run("fill")["status"] == "Failed"
        tally.add(area, "runs recovered")


# ---------------------------------------------------------------- 5. the model server gone

OPENAI_SPEC = """name: librarian-faults-openai
version: "1"
transport: xml_attrless
model:
  name: "openai:smollm2"
  server: llamacpp
  constrain: grammar
  temperature: 0.0
  max_tokens: 256
prompt_pack: {pack}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  strict_mode: false
  max_operations: 2
  batch_size: 1
  max_repair_retries: 2
  min_confidence: 0.0
  allowed_kinds: [retag_note, retitle_note, defer]
  context_window_tokens: 4096
"""


@pytest.mark.timeout(600)
def test_model_server_gone_before_and_during_a_run_then_rerun_recovers(
    tmp_path: Path, tally: Tally
) -> None:
    from llama_server import start_llama_server

    area = "fault: model server gone"
    notes = {rel: NOTES[rel] for rel in CHANGED}  # two notes, one request each
    ws = write_workspace(tmp_path / "notes", notes)
    old = digest(ws)
    spec = tmp_path / "openai.yaml"
    spec.write_text(
        OPENAI_SPEC.format(pack=REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"),
        "utf-8",
    )
    db = tmp_path / "s.duckdb"
    args = ["run", spec, "--workspace", ws, "--db", db, "--no-prefect"]

    # (a) killed before the first call: one call, no retry loop, a clear code.
    server = start_llama_server(tmp_path)
    try:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        tally.add(area, "faults injected")
        gone = run_cli(tmp_path / "a.log", *args, TOOLWIRE_OPENAI_BASE_URL=server.base_url)
    finally:
        server.stop()
    assert gone.returncode == 1 and "LLM_PROVIDER_UNREACHABLE" in gone.stderr, gone.stderr
    assert "Traceback" not in gone.stderr
    calls = [x for x in (tmp_path / "a.log").read_text().splitlines() if x.startswith("call ")]
    assert len(calls) == 1  # not transient: not retried (retries are bounded by design)
    assert digest(ws) == old
    check_acked(tally, area, db, tmp_path / "a.log")
    assert run_row(db, run_ids(db)[-1]) == ("Failed", "LLM_PROVIDER_UNREACHABLE")

    # (b) killed while the second request is in flight: the first answer is kept.
    server = start_llama_server(tmp_path)
    try:
        log = tmp_path / "b.log"
        proc = subprocess.Popen(
            child_cmd(log, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_env(TOOLWIRE_OPENAI_BASE_URL=server.base_url),
        )  # fmt: skip
        try:
            wait_for_line(log, "call 2", proc, limit_s=400)
            server.process.send_signal(signal.SIGKILL)
            tally.add(area, "faults injected")
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                sigkill(proc)
    finally:
        server.stop()
    stderr = err.decode("utf-8", "replace")
    assert proc.returncode == 1 and "LLM_PROVIDER_UNREACHABLE" in stderr, stderr[-2000:]
    assert digest(ws) == old  # a failed run applies nothing
    assert check_acked(tally, area, db, log) == 1  # the answer made before the kill
    assert run_row(db, run_ids(db)[-1]) == ("Failed", "LLM_PROVIDER_UNREACHABLE")

    # (c) a server again: the same run goes through.
    server = start_llama_server(tmp_path)
    try:
        again = run_cli(tmp_path / "c.log", *args, TOOLWIRE_OPENAI_BASE_URL=server.base_url)
    finally:
        server.stop()
    assert again.returncode in (0, 1), again.stderr
    assert "Traceback" not in again.stderr
    status, code = run_row(db, run_ids(db)[-1])
    tally.note(area, f"re-run after restart: {status} {code or ''}".strip())
    assert (status, code) == ("ok", None), again.stderr[-2000:]
    check_acked(tally, area, db, tmp_path / "c.log")
    tally.add(area, "runs recovered")


# ---------------------------------------------------------------- 6. a second process, same store


def hold_store(tmp: Path, db: Path, seconds: float, how: str) -> subprocess.Popen[bytes]:
    ready = tmp / f"held-{how}"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "hold-store", str(db), str(ready), str(seconds), how],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "holder did not start"
        time.sleep(0.02)
    return proc


@pytest.mark.timeout(300)
def test_second_process_on_the_store_waits_or_fails_locked_writing_no_note(
    tmp_path: Path, tally: Tally, versions: tuple[dict, dict]
) -> None:
    area = "fault: second process on the store"
    old, new = versions
    db = tmp_path / "s.duckdb"
    # (a) released within the lock wait: the run waits, then goes through.
    ws = write_workspace(tmp_path / "a")
    holder = hold_store(tmp_path, db, 3.0, "toolwire")
    tally.add(area, "faults injected")
    waited = run_cli(tmp_path / "a.log", *run_args(write_spec(tmp_path, [VALID], name="a"), ws, db),
                     TOOLWIRE_DB_LOCK_TIMEOUT_S="60")  # fmt: skip
    holder.wait(timeout=60)
    assert waited.returncode == 0, waited.stderr
    assert check_notes(tally, area, ws, old, new) == new
    check_acked(tally, area, db, tmp_path / "a.log")
    # (b) held longer than the wait (a raw DuckDB transaction): STORE_LOCKED, no note written.
    ws = write_workspace(tmp_path / "b")
    holder = hold_store(tmp_path, db, 120.0, "raw")
    try:
        tally.add(area, "faults injected")
        locked = run_cli(tmp_path / "b.log",
                         *run_args(write_spec(tmp_path, [VALID], name="b"), ws, db),
                         TOOLWIRE_DB_LOCK_TIMEOUT_S="2")  # fmt: skip
    finally:
        sigkill(holder)
    assert locked.returncode == 1 and "STORE_LOCKED" in locked.stderr, locked.stderr
    assert "Traceback" not in locked.stderr
    assert check_notes(tally, area, ws, old, new) == old
    assert not (ws / ".toolwire" / "journal").exists()
    assert logged_attempts(tmp_path / "b.log") == []  # it never reached the model
    # (c) three runs at once on one store, different workspaces: all complete, all stored.
    procs = []
    for name in ("c1", "c2", "c3"):
        ws = write_workspace(tmp_path / name)
        spec = write_spec(tmp_path, [MALFORMED, VALID], name=name)  # a repair: 2 attempts each
        procs.append((ws, tmp_path / f"{name}.log", subprocess.Popen(
            child_cmd(tmp_path / f"{name}.log", *run_args(spec, ws, db)),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(),
        )))  # fmt: skip
    errors = [proc.communicate(timeout=280)[1] for _, _, proc in procs]
    # Checked once all have ended: a run holds the store file until it ends.
    for (ws, log, proc), err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err.decode()[-2000:]
        assert check_notes(tally, area, ws, old, new) == new
        assert check_acked(tally, area, db, log) == 2
    tally.add(area, "concurrent runs", len(procs))
    with open_db(db) as con:
        statuses = con.execute("SELECT status, count(*) FROM runs GROUP BY 1").fetchall()
    assert dict(statuses) == {"ok": 4}  # (a) and (c); (b) never got a run row
