"""Issue 33 items 1, 4 and 2 under one real Prefect server: served runs keep notes out of
Prefect, `toolwire serve` follows an edited schedule, and a batch with a Failed run is Failed.

1. Two served librarian specs over notes that carry a marker string: one run
   ends ok (a dry run: its report has a diff around the marker), one `Failed`
   (a terminal provider fault, after its prompt with the notes was sent). The
   Failed flow run's state message is the code and one line; the marker is in
   neither Prefect's database files nor the `serve` terminal's output. The failed
   run is one ERROR line with its code in both, no traceback (issue 47).
2. A served spec's cron and timezone are edited: the deployment's schedule
   follows; a cron that never fires pauses it (saying why); fixed, it resumes.
   `spec check` warns about the never-firing cron.
3. (Item 2) `toolwire batch` on this server with one run that fails: the batch's
   flow run and that run's `batch-runs` task are FAILED, counts in the message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from test_cli_serve import _post
from test_librarian_replay import VALID, _spec, _workspace
from test_schedule import UUID, Server, _stop, _wait_for, far_cron, server  # noqa: F401 (fixture)

from toolwire.store import Store

pytestmark = pytest.mark.local

MARKER = "QX7-PRIVATE-NOTE-MARKER-93"


def _served_librarian(tmp_path: Path, name: str, script: list[str] | str) -> Path:
    """A librarian spec named ``name`` over notes with MARKER in two bodies, scheduled."""
    folder = tmp_path / name
    folder.mkdir()
    ws = _workspace(folder)
    bread = ws / "bread.md"
    bread.write_text(bread.read_text().replace("Feed the", f"{MARKER} feed the"))
    vacuum = ws / "misc" / "vacuum.md"
    vacuum.write_text(vacuum.read_text() + f"\nSecret detail: {MARKER}.\n")
    spec = _spec(folder, script if isinstance(script, list) else [])
    if isinstance(script, str):
        (folder / "script.jsonl").write_text(script, encoding="utf-8")
    text = spec.read_text().replace("name: librarian-test", f"name: {name}")
    text += (
        f'schedule:\n  cron: "{far_cron()}"\n  workspace: notes\n  parameters: {{dry_run: true}}\n'
    )
    spec.write_text(text, encoding="utf-8")
    return spec


def _serve(server: Server, log: Path, cwd: Path, *specs: Path) -> subprocess.Popen[bytes]:  # noqa: F811
    return subprocess.Popen(
        [sys.executable, "-m", "toolwire", "serve", *map(str, specs), "--db",
         str(cwd / "served.duckdb")],
        env=server.env, cwd=cwd, stdout=log.open("w"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def _run(server: Server, deployment: str) -> dict[str, Any]:  # noqa: F811
    ran = server.prefect("deployment", "run", deployment, "--watch", "--watch-timeout", "300")
    flow_run_id = UUID.search(ran.stdout).group(0)  # type: ignore[union-attr]
    return server.get(f"/flow_runs/{flow_run_id}")


def _logs(server: Server, flow_run_id: str) -> list[str]:  # noqa: F811
    body = {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC"}
    return [entry["message"] for entry in _post(server, "/logs/filter", body)]


def test_served_runs_keep_note_text_out_of_prefect_and_the_terminal(
    server: Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    good = _served_librarian(tmp_path, "private-ok", [VALID])
    bad = _served_librarian(tmp_path, "private-bad", '{"fault": "error"}\n')
    log = tmp_path / "serve.log"
    serve = _serve(server, log, tmp_path, good, bad)
    try:
        for name in ("private-ok", "private-bad"):
            _wait_for(
                f"deployment {name}",
                lambda n=name: server.get(f"/deployments/name/librarian/{n}"),
                180,
                serve,
            )
        ok_run = _run(server, "librarian/private-ok")
        bad_run = _run(server, "librarian/private-bad")
        deadline = time.monotonic() + 60  # Prefect ships logs in batches
        while time.monotonic() < deadline:
            if any("Failed: LLM_PROVIDER_ERROR" in m for m in _logs(server, bad_run["id"])):
                break
            time.sleep(1)
        time.sleep(3)
    finally:
        _stop(serve)

    assert ok_run["state_type"] == "COMPLETED", ok_run["state"]
    assert bad_run["state_type"] == "FAILED", bad_run["state"]
    message = bad_run["state"]["message"]
    assert message.startswith("LLM_PROVIDER_ERROR: ") and "\n" not in message, message
    assert len(message) <= 300
    # The runs really carried the marker: the prompts in the store hold it.
    _, prompts = Store(tmp_path / "served.duckdb").query(
        "SELECT count(*) FROM attempts WHERE prompt_json LIKE ?", [f"%{MARKER}%"]
    )
    assert prompts[0][0] >= 1, prompts

    served_output = log.read_text("utf-8", errors="replace")
    assert "Failed: LLM_PROVIDER_ERROR" in served_output  # the terminal does show the run
    # One ERROR line, with the code, and no traceback (issue 47: Prefect's engine logged
    # FailedRun's 2,700-character traceback; each failed task added two more lines).
    errors = [line for line in served_output.splitlines() if "| ERROR " in line]
    assert len(errors) == 1 and "Failed: LLM_PROVIDER_ERROR: " in errors[0], errors
    assert "Traceback" not in served_output
    logged = _post(server, "/logs/filter", {"logs": {"flow_run_id": {"any_": [bad_run["id"]]}}})
    logged_errors = [entry["message"] for entry in logged if entry["level"] >= 40]
    assert len(logged_errors) == 1 and "Failed: LLM_PROVIDER_ERROR: " in logged_errors[0]
    assert not any("Traceback" in entry["message"] for entry in logged)
    assert MARKER not in served_output
    assert "TypeError" not in served_output and "RunResult(" not in served_output
    home = Path(server.env["PREFECT_HOME"])
    leaked = [p.name for p in home.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    assert leaked == [], leaked  # prefect.db (+ -wal), the server log, stored results
    artifacts = _post(server, "/artifacts/filter", {})
    assert artifacts and not any(MARKER in json.dumps(a) for a in artifacts)


def _schedule(server: Server, deployment: str) -> tuple[str, str, bool]:  # noqa: F811
    (schedule,) = server.get(f"/deployments/name/{deployment}")["schedules"]
    return schedule["schedule"]["cron"], schedule["schedule"]["timezone"], schedule["active"]


def test_serve_follows_an_edited_cron_and_pauses_a_never_firing_one(
    server: Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    spec = _served_librarian(tmp_path, "follows-cron", [VALID])
    first = spec.read_text()
    old_cron = far_cron()
    log = tmp_path / "serve.log"
    serve = _serve(server, log, tmp_path, spec)
    deployment = "librarian/follows-cron"
    try:
        _wait_for(
            "the deployment", lambda: server.get(f"/deployments/name/{deployment}"), 180, serve
        )
        assert _schedule(server, deployment) == (old_cron, "UTC", True)

        hour = (datetime.now(ZoneInfo("Europe/Paris")).hour + 13) % 24
        new_cron = f"30 {hour} * * *"
        spec.write_text(
            first.replace(f'cron: "{old_cron}"', f'cron: "{new_cron}"\n  timezone: Europe/Paris')
        )
        _wait_for(
            "the new schedule",
            lambda: _schedule(server, deployment) == (new_cron, "Europe/Paris", True),
            120,
            serve,
        )

        spec.write_text(first.replace(f'cron: "{old_cron}"', 'cron: "0 0 31 2 *"'))
        _wait_for("the pause", lambda: not _schedule(server, deployment)[2], 120, serve)
        checked = subprocess.run(
            [sys.executable, "-m", "toolwire", "spec", "check", str(spec)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr  # a warning, not an error
        assert "warning:" in checked.stderr and "never fires" in checked.stderr

        spec.write_text(first)
        _wait_for(
            "the schedule back",
            lambda: _schedule(server, deployment) == (old_cron, "UTC", True),
            120,
            serve,
        )
    finally:
        _stop(serve)
    output = log.read_text("utf-8", errors="replace")
    assert f"now runs on '{new_cron}' (Europe/Paris)" in output, output[-3000:]
    assert "never fires" in output and "paused" in output, output[-3000:]


def test_a_batch_with_a_failed_run_is_failed_on_the_server(
    server: Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    from test_batch import librarian_inputs, write_script

    spec, (ws,), good, _ = librarian_inputs(tmp_path, 1)
    broken = write_script(tmp_path / "broken.jsonl", [])
    (tmp_path / "broken.jsonl").write_text('{"fault": "error"}\n', encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", "batch", str(spec), "-w", str(ws), "--models",
         f"{good},{broken}", "--db", str(tmp_path / "b.duckdb"), "--dry-run", "--no-check"],
        env=server.env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert "planned 2, finished 2 (1 Failed, 0 unchecked), lost 0" in ran.stderr
    (batch,) = _post(server, "/flow_runs/filter", {"flows": {"name": {"any_": ["toolwire-batch"]}}})
    assert batch["state_type"] == "FAILED", batch["state"]
    counts = "planned 2, finished 2 (1 Failed, 0 unchecked), lost 0"
    assert batch["state"]["message"].startswith(counts)
    tasks = _post(
        server,
        "/task_runs/filter",
        {
            "flow_runs": {"id": {"any_": [batch["id"]]}},
            "task_runs": {"name": {"like_": "batch-runs"}},
        },
    )
    assert sorted(t["state_type"] for t in tasks) == ["COMPLETED", "FAILED"], tasks
    (failed,) = [t for t in tasks if t["state_type"] == "FAILED"]
    assert failed["state"]["message"] == "1 of 1 runs failed (LLM_PROVIDER_ERROR)"
