"""Issue 17, one run pipeline, checked through the real command line.

- one injected provider timeout (a ``{"fault": "timeout"}`` line in a replay
  script) is retried the same way by ``toolwire run``, ``--no-prefect`` and
  ``toolwire batch`` with threads and with processes;
- a bad ``TOOLWIRE_*`` value is one line and exit 2 from every command;
- every shipped spec under ``specs/`` runs, and the README's agent examples do
  what they say;
- an agent run appends a profile version.

The served-deployment half (retry, Failed flow run, logs) is in
``test_run_pipeline_served.py``: it needs a real Prefect server.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from toolwire.store import Store

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
SCRATCH = REPO / "tests" / "data" / "tools" / "scratch"
CASSETTE = REPO / "tests" / "data" / "replay" / "agent-xct.jsonl"
RETRY_LINE = "model call failed (LLM_PROVIDER_TIMEOUT), attempt 1 of 3; retrying in 1 s"
NOTES_LISTED = ("notes/alpha.md", "notes/beta.md", "notes/archive/2023-meeting.md")


def toolwire(*args: str | Path, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        cwd=cwd,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def faulty_script(tmp_path: Path) -> Path:
    """The agent-xct cassette with one provider timeout in front of it."""
    script = tmp_path / "timeout-then-xct.jsonl"
    script.write_text('{"fault": "timeout"}\n' + CASSETTE.read_text("utf-8"), encoding="utf-8")
    return script


def scratch(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(SCRATCH, tmp_path / name))


def assert_index_lists_every_note(workspace: Path) -> None:
    index = (workspace / "index.md").read_text("utf-8")
    assert all(note in index for note in NOTES_LISTED), index


# -- retries: the same through every entry point ------------------------------------------

ENTRY_POINTS = {
    "run --prefect": ("run", "--workspace", "{ws}", "--prefect"),
    "run (no Prefect API: plain)": ("run", "--workspace", "{ws}"),
    "run --no-prefect": ("run", "--workspace", "{ws}", "--no-prefect"),
    "batch threads": ("batch", "-w", "{ws}", "--task-runner", "threads", "--no-check"),
    "batch processes": ("batch", "-w", "{ws}", "--task-runner", "processes", "--no-check"),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_one_injected_timeout_is_retried_the_same_through_every_entry_point(
    tmp_path: Path, entry: str
) -> None:
    ws, db = scratch(tmp_path, "ws"), tmp_path / "store.duckdb"
    command, *rest = ENTRY_POINTS[entry]
    args = [a.replace("{ws}", str(ws)) for a in rest]
    spec = REPO / "specs" / "agent-xct.yaml"
    model = "--models" if command == "batch" else "--model"
    ran = toolwire(command, spec, *args, model, f"replay:{faulty_script(tmp_path)}", "--db", db)
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-3000:]
    assert "cannot pickle" not in output and "Traceback" not in output
    # One retry, logged in the same words, then the run goes on as if nothing happened.
    assert output.count(RETRY_LINE) == 1, output[-3000:]
    _, runs = Store(db).query("SELECT status, error_code, turns FROM runs")
    _, attempts = Store(db).query("SELECT count(*) FROM attempts")
    assert runs == [("ok", None, 7)] and attempts == [(8,)]
    assert_index_lists_every_note(ws)


# -- settings: one line, exit 2, every command ---------------------------------------------


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf command of the Typer app, as argv words (Typer bundles its own Click)."""
    paths: list[tuple[str, ...]] = []
    commands: dict[str, object] = getattr(group, "commands", {})
    for name, command in sorted(commands.items()):
        if getattr(command, "commands", None) is not None:
            paths += _command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def test_a_bad_setting_is_one_line_and_exit_2_from_every_command(tmp_path: Path) -> None:
    from toolwire.cli import app

    paths = _command_paths(typer.main.get_command(app))
    assert len(paths) >= 20 and ("run",) in paths and ("spec", "check") in paths
    for bad in ({"TOOLWIRE_DB_LOCK_TIMEOUT_S": "soon"}, {"TOOLWIRE_LOG_LEVEL": "LOUD"}):
        (name,) = bad
        for path in paths:
            ran = toolwire(*path, cwd=tmp_path, **bad)
            where = f"{' '.join(path)} with {bad}"
            assert ran.returncode == 2, (where, ran.stdout, ran.stderr)
            lines = ran.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: USAGE_ERROR: invalid setting"), (
                where,
                ran.stderr,
            )
            assert name in lines[0] and not ran.stdout


# -- every shipped spec runs -----------------------------------------------------------------

SHIPPED = sorted(p.name for p in (REPO / "specs").glob("*.yaml"))


def test_the_shipped_specs_are_the_ones_tested_here() -> None:
    agents = [f"agent-{t}.yaml" for t in ("execute", "native", "xct", "xml-final", "xml")]
    assert SHIPPED == sorted([*agents, "librarian-replay.yaml", "librarian.yaml"])


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_spec_runs_with_its_defaults(tmp_path: Path, name: str) -> None:
    from toolwire.jobs import RunOptions
    from toolwire.lifecycle import run_job

    spec, db = REPO / "specs" / name, tmp_path / "store.duckdb"
    if name.startswith("agent-"):
        ws = scratch(tmp_path, "ws")
        result = run_job(RunOptions(str(spec), workspace=str(ws), db=str(db)))
        assert result.ok, (result.error_code, result.error_message)
        assert_index_lists_every_note(ws)
        return
    ws = Path(shutil.copytree(REPO / "data" / "notes", tmp_path / "notes"))
    if name == "librarian.yaml":
        # The bundled local model reads every note: two notes keep the test short.
        keep = sorted(ws.rglob("*.md"))[:2]
        for note in ws.rglob("*.md"):
            if note not in keep:
                note.unlink()
    result = run_job(RunOptions(str(spec), workspace=str(ws), db=str(db), dry_run=True))
    assert result.ok, (result.error_code, result.error_message)
    assert result.attempts and all(a.parse_ok for a in result.attempts)


def test_an_agent_run_appends_a_profile_version(tmp_path: Path) -> None:
    ws, db = scratch(tmp_path, "ws"), tmp_path / "store.duckdb"
    spec = REPO / "specs" / "agent-native.yaml"
    for n in (1, 2):
        ran = toolwire("run", spec, "--workspace", ws, "--db", db, "--user", "ann", "--no-prefect")
        assert ran.returncode == 0, ran.stderr
        _, rows = Store(db).query(
            "SELECT p.version, p.interactions, p.run_id = r.run_id FROM profiles p "
            "JOIN runs r ON r.run_id = p.run_id WHERE p.user_id = 'ann' ORDER BY version"
        )
        assert [row[:2] for row in rows] == [(v, v) for v in range(1, n + 1)]


# -- the README's agent examples, as written -------------------------------------------------


def _readme_agent_commands() -> list[str]:
    readme = (REPO / "README.md").read_text("utf-8")
    section = readme[readme.index("## Tool agents") :]
    start = section.index("```bash") + len("```bash")
    block = section[start : section.index("```", start)]
    joined = re.sub(r"\\\n\s*", "", block)
    lines = [ln.split("#")[0].strip() for ln in joined.splitlines()]
    return [ln for ln in lines if ln.startswith("toolwire run")]


def test_the_readmes_agent_examples_do_what_they_say(tmp_path: Path) -> None:
    commands = _readme_agent_commands()
    assert len(commands) >= 3
    for n, command in enumerate(commands):
        ws = scratch(tmp_path, f"scratch-{n}")
        args = shlex.split(command.replace("/tmp/scratch", str(ws)))[1:]
        ran = toolwire(*args, "--db", tmp_path / "store.duckdb")
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
        assert ran.stderr.splitlines()[-2].startswith("ok:"), ran.stderr
        assert_index_lists_every_note(ws)


# -- Prefect only where there is a Prefect API (issue 19 item 1) ---------------------------


def test_a_run_is_a_flow_run_only_with_a_prefect_api_or_when_asked(tmp_path: Path) -> None:
    spec = REPO / "specs" / "agent-xct.yaml"
    home = tmp_path / "prefect-home"  # no profiles.toml, no PREFECT_API_URL: no API
    env = {"PREFECT_HOME": str(home), "PREFECT_API_URL": ""}
    db = tmp_path / "store.duckdb"
    plain = toolwire("run", spec, "--workspace", scratch(tmp_path, "a"), "--db", db, **env)
    assert plain.returncode == 0, plain.stderr[-3000:]
    # No throwaway server: Prefect's database was never created, the run has no flow run.
    assert not (home / "prefect.db").exists()
    asked = toolwire(
        "run", spec, "--workspace", scratch(tmp_path, "b"), "--db", db, "--prefect", **env
    )
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert (home / "prefect.db").exists()
    _, rows = Store(db).query("SELECT flow_run_id IS NOT NULL FROM runs ORDER BY started_at")
    assert rows == [(False,), (True,)]
