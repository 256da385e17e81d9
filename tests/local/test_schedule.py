"""Schedules under a real Prefect server: `toolwire serve`, a run by hand, the run in the store.

Starts `prefect server start` on 127.0.0.1 (free port, private PREFECT_HOME),
serves a replay spec with a cron schedule, triggers it with
`prefect deployment run`, and finds the run in the store with its flow-run id.
Also deploys flows/prefect.yaml to the same server. Every process started here
is stopped here (its whole process group).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
PREFECT = Path(sys.executable).parent / "prefect"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def far_cron(timezone: str = "UTC") -> str:
    """A nightly cron whose next firing is about twelve hours away.

    A served deployment's runner starts scheduled runs a few seconds early, so
    a fixed "0 3 * * *" made these tests start an extra run whenever they ran
    just before 03:00 (CI once did, at 02:59:49 UTC). The tests trigger runs by
    hand and must see only those.
    """
    return f"0 {(datetime.now(ZoneInfo(timezone)).hour + 12) % 24} * * *"


def _wait_for(what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what}: the process exited with {proc.returncode}"
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started with start_new_session=True, and its children."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class Server:
    def __init__(self, url: str, env: dict[str, str], proc: subprocess.Popen) -> None:
        self.url, self.env, self.proc = url, env, proc

    def get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def prefect(self, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PREFECT), *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = os.environ | {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": url,
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        server = Server(url, env, proc)
        _wait_for("the Prefect server", lambda: server.get("/health") is True, 120, proc)
        yield server
    finally:
        _stop(proc)
        log.close()


def test_served_schedule_runs_by_hand_and_lands_in_the_store(
    server: Server, tmp_path: Path
) -> None:
    from toolwire.spec.model import load_spec
    from toolwire.store import Store

    _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID])
    cron = far_cron("Europe/Paris")
    with spec.open("a", encoding="utf-8") as f:
        f.write(
            "schedule:\n"
            f'  cron: "{cron}"\n'
            "  timezone: Europe/Paris\n"
            "  workspace: notes\n"
            "  parameters: {user: nightly, dry_run: true}\n"
        )
    loaded = load_spec(spec)
    db = tmp_path / "scheduled.duckdb"
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "toolwire", "serve", str(spec), "--db", str(db)],
        env=server.env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deployment = _wait_for(
            "the served deployment",
            lambda: server.get("/deployments/name/librarian/librarian-test"),
            120,
            serve,
        )
        assert deployment["version"] == loaded.hash
        assert deployment["parameters"] == {
            "spec_path": str(spec.resolve()),
            "workspace": str((tmp_path / "notes").resolve()),
            "db": str(db.resolve()),
            "user": "nightly",
            "dry_run": True,
        }
        (schedule,) = deployment["schedules"]
        assert schedule["active"] is True
        assert (schedule["schedule"]["cron"], schedule["schedule"]["timezone"]) == (
            cron,
            "Europe/Paris",
        )

        ran = server.prefect(
            "deployment", "run", "librarian/librarian-test", "--watch", "--watch-timeout", "240"
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        flow_run_id = UUID.search(ran.stdout).group(0)  # type: ignore[union-attr]
        flow_run = server.get(f"/flow_runs/{flow_run_id}")
        assert flow_run["state_type"] == "COMPLETED"
        assert flow_run["deployment_id"] == deployment["id"]
    finally:
        _stop(serve)
        log.close()
    _, rows = Store(db).query(
        "SELECT flow_run_id, status, user_id, dry_run, spec_hash, turns FROM runs"
    )
    assert rows == [(flow_run_id, "ok", "nightly", True, loaded.hash, 1)]
    _, attempts = Store(db).query("SELECT count(*) FROM attempts")
    assert attempts == [(1,)]


def test_prefect_yaml_deploys_to_a_work_pool(server: Server) -> None:
    created = server.prefect("work-pool", "create", "toolwire", "--type", "process")
    assert created.returncode == 0, created.stdout + created.stderr
    deployed = server.prefect(
        "--no-prompt", "deploy", "--prefect-file", "flows/prefect.yaml", "--all"
    )
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    nightly = server.get("/deployments/name/librarian/librarian-nightly")
    batch = server.get("/deployments/name/batch/batch-replay")
    assert nightly["work_pool_name"] == batch["work_pool_name"] == "toolwire"
    assert nightly["entrypoint"] == "flows/librarian.py:librarian"
    assert batch["entrypoint"] == "flows/batch.py:batch"
    assert batch["schedules"] == []
    # The file's schedule is the spec's schedule: the two must not drift apart.
    spec_schedule = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text())["schedule"]
    (schedule,) = nightly["schedules"]
    assert schedule["schedule"]["cron"] == spec_schedule["cron"]
    assert schedule["schedule"]["timezone"] == spec_schedule["timezone"]
    assert nightly["parameters"]["spec_path"] == "specs/librarian.yaml"
    assert (REPO / nightly["parameters"]["spec_path"]).is_file()
    assert (REPO / nightly["parameters"]["workspace"]).is_dir()
