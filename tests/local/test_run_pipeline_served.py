"""Issue 17 under a real Prefect server: served agent specs, retries, Failed flow runs, logs.

`toolwire serve` serves two scheduled *agent* specs (agent schedules are
servable). One replays a provider timeout before its answers: the served run
retries it like every other entry point and ends ok. The other replays a
terminal provider fault: its run is `Failed` in the store, so its flow run is
`Failed` too, with the error code first in the state message, and
`prefect deployment run --watch` exits non-zero. Both flow runs' logs hold
toolwire's own lines, `toolwire serve` prints them, and each run appended a
profile version for the schedule's user.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_cli_serve import _post
from test_run_pipeline import CASSETTE, REPO, RETRY_LINE, assert_index_lists_every_note, scratch
from test_schedule import UUID, Server, _stop, _wait_for, far_cron, server  # noqa: F401 (fixture)

from toolwire.store import Store

pytestmark = pytest.mark.local


def _scheduled_agent(tmp_path: Path, name: str, script: str) -> Path:
    """specs/agent-xct.yaml renamed, replaying ``script``, with a nightly schedule."""
    (tmp_path / f"{name}.jsonl").write_text(script, encoding="utf-8")
    text = (REPO / "specs" / "agent-xct.yaml").read_text("utf-8")
    text = text.replace("name: agent-xct", f"name: {name}")
    text = text.replace("../tests/data/replay/agent-xct.jsonl", f"{name}.jsonl")
    scratch(tmp_path, f"ws-{name}")
    text += (
        f'schedule:\n  cron: "{far_cron()}"\n'
        f"  workspace: ws-{name}\n  parameters: {{user: nightly}}\n"
    )
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def _logs(api: Server, flow_run_id: str) -> list[str]:
    body = {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC"}
    return [entry["message"] for entry in _post(api, "/logs/filter", body)]


def _run(api: Server, deployment: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    ran = api.prefect("deployment", "run", deployment, "--watch", "--watch-timeout", "240")
    flow_run_id = UUID.search(ran.stdout).group(0)  # type: ignore[union-attr]
    return ran, api.get(f"/flow_runs/{flow_run_id}")


def test_served_agent_runs_retry_fail_honestly_and_log_to_prefect(
    server: Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    good = _scheduled_agent(
        tmp_path, "served-ok", '{"fault": "timeout"}\n' + CASSETTE.read_text("utf-8")
    )
    bad = _scheduled_agent(tmp_path, "served-bad", '{"fault": "error"}\n')
    db = tmp_path / "served.duckdb"
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen(
            [sys.executable, "-m", "toolwire", "serve", str(good), str(bad), "--db", str(db)],
            env=server.env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            for name in ("served-ok", "served-bad"):
                _wait_for(
                    f"deployment agent/{name}",
                    lambda n=name: server.get(f"/deployments/name/agent/{n}"),
                    120,
                    serve,
                )
            ok_ran, ok_run = _run(server, "agent/served-ok")
            bad_ran, bad_run = _run(server, "agent/served-bad")
            # Prefect sends logs in batches: give the last ones a moment to land.
            ok_logs, bad_logs = [], []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ok_logs, bad_logs = _logs(server, ok_run["id"]), _logs(server, bad_run["id"])
                if any(" ok: " in m for m in ok_logs) and any("Failed" in m for m in bad_logs):
                    break
                time.sleep(1)
        finally:
            _stop(serve)
    served_output = log_path.read_text("utf-8")

    # The timeout was retried once, in the same words as everywhere else; the run is ok.
    assert ok_ran.returncode == 0, ok_ran.stdout + ok_ran.stderr
    assert ok_run["state_type"] == "COMPLETED"
    assert sum(RETRY_LINE in m for m in ok_logs) == 1, ok_logs
    assert any(m.startswith("run ") and " started: agent spec served-ok" in m for m in ok_logs)
    assert_index_lists_every_note(tmp_path / "ws-served-ok")

    # A Failed run is a Failed flow run, code first, and --watch says so.
    assert bad_run["state_type"] == "FAILED", bad_run["state"]
    assert bad_run["state"]["message"].startswith("LLM_PROVIDER_ERROR: "), bad_run["state"]
    assert bad_ran.returncode != 0, bad_ran.stdout
    assert any("Failed: LLM_PROVIDER_ERROR" in m for m in bad_logs), bad_logs

    # `toolwire serve` printed the runs' lines as they happened.
    assert RETRY_LINE in served_output and "Failed: LLM_PROVIDER_ERROR" in served_output

    store = Store(db)
    _, runs = store.query(
        "SELECT spec_name, status, error_code, flow_run_id, user_id FROM runs ORDER BY spec_name"
    )
    assert runs == [
        ("served-bad", "Failed", "LLM_PROVIDER_ERROR", bad_run["id"], "nightly"),
        ("served-ok", "ok", None, ok_run["id"], "nightly"),
    ]
    # Memory for every job: each agent run appended a version of the user's profile.
    _, versions = store.query(
        "SELECT r.spec_name FROM profiles p JOIN runs r USING (run_id) "
        "WHERE p.user_id = 'nightly' ORDER BY p.version"
    )
    assert sorted(v for (v,) in versions) == ["served-bad", "served-ok"]
