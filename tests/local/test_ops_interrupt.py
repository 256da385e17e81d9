"""Issue 33 item 3: Ctrl-C and SIGTERM end the run `Failed` (INTERRUPTED), at once.

A real `toolwire run` waits on a model server that never answers; SIGINT (and,
in a second run, SIGTERM) stops it: one line naming the run, exit 130 / 143,
the run `Failed` with INTERRUPTED in the store (not `running`), the notes
untouched, and the next run on the workspace ends ok. The apply of a plan is
shielded: a SIGTERM that arrives in the middle of it waits until every note is
new, and the journal says `applied`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_librarian_replay import NOTES, VALID, _spec, _workspace

from toolwire.store import Store

pytestmark = pytest.mark.local


class _SilentServer:
    """Accepts connections, reads the request, never answers (a model stuck thinking)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[_SilentServer]:
    server = _SilentServer()
    yield server
    server.close()


def _start(spec: Path, ws: Path, db: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWIRE_", "OPENAI_"))}
    env |= {"TOOLWIRE_OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "PREFECT_API_URL": ""}
    return subprocess.Popen(
        [sys.executable, "-m", "toolwire", "run", str(spec), "--workspace", str(ws),
         "--db", str(db), "--model", "openai:stuck", "--no-prefect"],
        env=env, cwd=spec.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _interrupt_while_waiting(
    proc: subprocess.Popen[str], server: _SilentServer, signum: int
) -> tuple[int, str]:
    deadline = time.monotonic() + 120
    while not server.accepted:  # the run row is written before the first model call
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never called the model"
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_ends_failed_and_the_next_run_is_fine(
    tmp_path: Path, silent: _SilentServer, signum: int, code: int
) -> None:
    ws = _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID])
    db = tmp_path / "store.duckdb"
    returncode, err = _interrupt_while_waiting(_start(spec, ws, db, silent.port), silent, signum)

    assert returncode == code, err
    assert "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("interrupted: ")]
    assert "Failed: INTERRUPTED: stopped by " in line and "no note was changed" in line, line
    _, rows = Store(db).query("SELECT status, error_code FROM runs")
    assert rows == [("Failed", "INTERRUPTED")]
    assert {p: (ws / p).read_text() for p in NOTES} == NOTES  # untouched

    again = subprocess.run(
        [sys.executable, "-m", "toolwire", "run", str(spec), "--workspace", str(ws),
         "--db", str(db), "--no-prefect"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=os.environ | {"PREFECT_API_URL": ""},
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    _, rows = Store(db).query("SELECT status, count(*) FROM runs GROUP BY 1 ORDER BY 1")
    assert rows == [("Failed", 1), ("ok", 1)]


def test_a_sigterm_inside_an_apply_waits_for_every_note(tmp_path: Path) -> None:
    from toolwire.librarian.journal.disk import journal_state
    from toolwire.librarian.journal.write_ahead import apply_plan
    from toolwire.librarian.notes.changes import FileChange
    from toolwire.run.interrupts import RunInterrupted, interruptible, shielded

    ws = tmp_path / "ws"
    ws.mkdir()
    plan = []
    for i in range(40):
        (ws / f"n{i:03d}.md").write_text(f"old {i}\n")
        plan.append(FileChange(f"n{i:03d}.md", f"old {i}\n".encode(), f"new {i}\n".encode()))
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as caught, interruptible(), shielded():
        os.kill(os.getpid(), signal.SIGTERM)  # arrives before the first note is written
        apply_plan(ws, "run-term", plan)
    assert caught.value.signum == signal.SIGTERM
    assert all((ws / f"n{i:03d}.md").read_text() == f"new {i}\n" for i in range(40))
    assert journal_state(ws, "run-term") == "applied"
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is back, outside a run
