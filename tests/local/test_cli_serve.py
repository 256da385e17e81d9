"""What Prefect shows for a served spec (#19 item 3), under a real Prefect server.

`toolwire serve` deploys a spec; the spec is then edited while it is served and
the deployment is run by hand. The flow run's version and the deployment's
version are the *edited* spec's hash (what the store records), the run's
steps are task runs named `turn-1` of a task named `turn`, and the report is an
artifact under the one key of that spec.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_librarian_replay import VALID, _spec, _workspace
from test_schedule import UUID, Server, _stop, _wait_for, far_cron, server  # noqa: F401 (fixture)

pytestmark = pytest.mark.local


def _post(api: Server, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_served_run_carries_the_edited_specs_hash(server: Server, tmp_path: Path) -> None:  # noqa: F811
    from toolwire.spec.model import load_spec
    from toolwire.store import Store

    _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID, VALID])
    with spec.open("a", encoding="utf-8") as f:
        f.write(
            f'schedule:\n  cron: "{far_cron()}"\n'
            "  workspace: notes\n  parameters: {dry_run: true}\n"
        )
    served_hash = load_spec(spec).hash
    db = tmp_path / "served.duckdb"
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
        assert deployment["version"] == served_hash
        # Edit the spec while it is served: a new taxonomy topic, a new hash.
        spec.write_text(spec.read_text().replace("travel]", "travel, gardening]"))
        edited_hash = load_spec(spec).hash
        assert edited_hash != served_hash

        ran = server.prefect(
            "deployment", "run", "librarian/librarian-test", "--watch", "--watch-timeout", "240"
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        flow_run_id = UUID.search(ran.stdout).group(0)  # type: ignore[union-attr]
    finally:
        _stop(serve)
        log.close()

    flow_run = server.get(f"/flow_runs/{flow_run_id}")
    assert flow_run["state_type"] == "COMPLETED"
    assert flow_run["flow_version"] == edited_hash
    assert server.get(f"/deployments/{deployment['id']}")["version"] == edited_hash
    _, rows = Store(db).query("SELECT spec_hash FROM runs WHERE flow_run_id = ?", [flow_run_id])
    assert rows == [(edited_hash,)]  # Prefect and the store agree

    task_runs = _post(server, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    names = {t["name"] for t in task_runs}
    assert "turn-1" in names and "load-workspace" in names
    assert not any(n.startswith("turn-1-") for n in names)  # no random suffix
    turn_keys = {t["task_key"] for t in task_runs if t["name"].startswith("turn-")}
    assert len(turn_keys) == 1  # every turn is a run of one task

    artifacts = _post(
        server, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}}
    )
    assert [a["key"] for a in artifacts] == ["librarian-librarian-test"]
