"""CLI habits (#19 item 5, #20 items 5 and 6) as users meet them: real processes, exit codes.

--version, -h, completion; runs/show as JSON and CSV; show counting turns from 1
with plain milliseconds; pack check over several folders; a --record file every
line of which is JSON; the store's one default location; progress lines when
output goes to a file; a bogus transport named as such.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"  # the console script users run


def toolwire(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWIRE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one ok librarian run (replayed), and that run's id."""
    tmp = tmp_path_factory.mktemp("habits")
    ws = _workspace(tmp)
    db = tmp / "s.duckdb"
    ran = toolwire("run", _spec(tmp, [VALID]), "--workspace", ws, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    ids = toolwire("sql", "--db", db, "--format", "json", "select run_id from runs")
    return db, json.loads(ids.stdout)[0]["run_id"]


def test_version_and_short_help() -> None:
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        ran = toolwire(flag)
        assert ran.returncode == 0 and ran.stdout.strip() == f"toolwire {version('toolwire')}"
    assert "Usage: toolwire" in toolwire("-h").stdout
    sub = toolwire("run", "-h")  # subcommands inherit -h
    assert sub.returncode == 0 and "--tooling-transport" in sub.stdout


def test_shell_completion_script_is_offered() -> None:
    # Typer finds the user's shell among the process's ancestors (shellingham); a test
    # run whose parent shell has exited (a detached job, some CI runners) has none, so
    # the shell is named instead, through Typer's own switch for that.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    ran = toolwire("--show-completion", "bash", env=env)
    assert ran.returncode == 0, ran.stderr
    assert "_TOOLWIRE_COMPLETE" in ran.stdout and "complete " in ran.stdout


def test_runs_as_json_and_csv(one_run: tuple[Path, str]) -> None:
    db, run_id = one_run
    as_json = json.loads(toolwire("runs", "--db", db, "--format", "json").stdout)
    assert [r["run_id"] for r in as_json] == [run_id]
    assert as_json[0]["status"] == "ok" and as_json[0]["ops_applied"] == 2
    rows = list(csv.DictReader(io.StringIO(toolwire("runs", "--db", db, "-f", "csv").stdout)))
    assert [r["run_id"] for r in rows] == [run_id]


def test_show_as_json_counts_turns_from_one(one_run: tuple[Path, str]) -> None:
    db, run_id = one_run
    ran = toolwire("show", run_id[:10], "--db", db, "--format", "json")
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["run"]["run_id"] == run_id and doc["run"]["status"] == "ok"
    assert [a["turn"] for a in doc["attempts"]] == [1]
    assert {o["turn"] for o in doc["operations"]} == {1} and len(doc["operations"]) == 2
    assert "raw_text" in doc["attempts"][0]


def test_show_csv_parts(one_run: tuple[Path, str]) -> None:
    db, run_id = one_run
    ops = toolwire("show", run_id, "--db", db, "-f", "csv", "--part", "operations")
    rows = list(csv.DictReader(io.StringIO(ops.stdout)))
    assert sorted(r["kind"] for r in rows) == ["retag_note", "retitle_note"]
    assert {r["turn"] for r in rows} == {"1"}


def test_show_table_prints_plain_milliseconds(one_run: tuple[Path, str], tmp_path: Path) -> None:
    import duckdb

    db, run_id = one_run
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as con:  # a latency the old format printed as 3.241e+04
        con.execute("UPDATE attempts SET latency_ms = 32410.7")
    ran = toolwire("show", run_id, "--db", copy)
    assert ran.returncode == 0, ran.stderr
    assert "32411" in ran.stdout and "e+" not in ran.stdout
    first_row = next(line for line in ran.stdout.splitlines() if "initial" in line)
    assert first_row.split()[0] == "1"  # turn 1, as the markdown report counts


def test_pack_check_takes_several_folders(tmp_path: Path) -> None:
    packs = REPO / "src" / "toolwire" / "prompt_packs"
    ok = toolwire("pack", "check", packs / "librarian", packs / "librarian-small")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count("\nok ") + ok.stdout.startswith("ok ") == 2
    mixed = toolwire("pack", "check", tmp_path / "nope", packs / "librarian-small")
    assert mixed.returncode == 1
    assert "nope" in mixed.stderr and "ok " in mixed.stdout  # the good one still checked


def test_record_file_is_json_lines_and_replays(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID])
    recording = tmp_path / "rec" / "run.jsonl"
    ran = toolwire(
        "run", spec, "--workspace", ws, "--db", tmp_path / "a.duckdb", "--dry-run",
        "--record", recording, "--no-prefect",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    lines = recording.read_text(encoding="utf-8").splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
    if shutil.which("jq"):
        jq = subprocess.run(["jq", "-c", ".finish_reason", str(recording)], capture_output=True)
        assert jq.returncode == 0, jq.stderr
    again = toolwire(
        "run", spec, "--workspace", ws, "--db", tmp_path / "b.duckdb", "--dry-run",
        "--model", f"replay:{recording}", "--no-prefect",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "operations 2 planned" in again.stderr  # the same plan, replayed


def test_store_path_names_one_default_wherever_you_stand(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLWIRE_DB"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    expected = str(tmp_path / "xdg" / "toolwire" / "toolwire.duckdb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (tmp_path, elsewhere):
        ran = toolwire("store", "path", env=env, cwd=cwd)
        assert ran.returncode == 0 and ran.stdout.strip() == expected
        assert "default" in ran.stderr
    # A run without --db lands there, not in ./data.
    ws = _workspace(tmp_path)
    assert toolwire("run", _spec(tmp_path, [VALID]), "--workspace", ws, "--dry-run",
                    "--no-prefect", env=env, cwd=elsewhere).returncode == 0  # fmt: skip
    assert Path(expected).is_file() and not (elsewhere / "data").exists()
    env["TOOLWIRE_DB"] = str(tmp_path / "env.duckdb")
    ran = toolwire("store", "path", env=env)
    assert ran.stdout.strip() == env["TOOLWIRE_DB"] and "TOOLWIRE_DB" in ran.stderr


def test_progress_lines_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "third.md").write_text("A third note.\n")
    spec = _spec(tmp_path, [VALID, VALID])
    spec.write_text(spec.read_text().replace("batch_size: 10", "batch_size: 2"))
    ran = toolwire("run", spec, "--workspace", ws, "--db", tmp_path / "s.duckdb",
                   "--dry-run", "--no-prefect")  # fmt: skip
    lines = [line for line in ran.stderr.splitlines() if line.startswith("librarian: ")]
    assert lines[0].startswith("librarian: started")
    assert any("request 1/2 done" in line for line in lines), ran.stderr
    assert any("request 2/2 done" in line for line in lines), ran.stderr


def test_bogus_transport_is_named_before_anything_else(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ran = toolwire("run", REPO / "specs" / "agent-xml.yaml", "--workspace", ws,
                   "--tooling-transport", "bogus", "--dry-run")  # fmt: skip
    assert ran.returncode == 2
    assert "unknown transport 'bogus'" in ran.stderr and "--dry-run" not in ran.stderr


def test_missing_prompt_pack_is_a_usage_error(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID])
    spec.write_text(spec.read_text().replace("librarian-small", "no-such-pack"))
    ran = toolwire("run", spec, "--workspace", ws, "--db", tmp_path / "s.duckdb", "--no-prefect")
    assert ran.returncode == 2, ran.stderr
    assert "no-such-pack" in ran.stderr and "Traceback" not in ran.stderr


def test_store_merge_into_itself_says_so(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "only.duckdb"
    duckdb.connect(str(db)).close()
    ran = toolwire("store", "merge", tmp_path, "--db", db)
    assert ran.returncode == 2
    assert "is the target store itself" in ran.stderr


def test_a_run_says_which_notes_the_model_saw_cut(tmp_path: Path) -> None:
    """Issue 19 item 10: truncation is one warning line, printed and stored."""
    ws = _workspace(tmp_path)
    (ws / "long-read.md").write_text(
        "---\ntitle: A long read\n---\n\n" + "Vacuum and analyze the tables nightly. " * 600,
        encoding="utf-8",
    )
    nothing = (
        "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
        "<summary>no change</summary>\n<operations>\n</operations>\n<warnings></warnings>\n"
        "</librarian_response>"
    )
    spec = _spec(tmp_path, [nothing] * 3)  # the window splits the notes into 3 requests
    text = spec.read_text("utf-8").replace(
        "  batch_size: 10", "  batch_size: 10\n  context_window_tokens: 900"
    )
    spec.write_text(text, encoding="utf-8")
    db = tmp_path / "s.duckdb"
    ran = toolwire("run", spec, "--workspace", ws, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    lines = [ln for ln in ran.stderr.splitlines() if "cut to fit" in ln]
    assert lines == [
        "warning: 1 note(s) shown to the model cut to fit context_window_tokens=900 "
        "(it saw only their start): long-read"
    ], ran.stderr
    stored = toolwire("sql", "--db", db, "--format", "json", "select message from run_warnings")
    assert "long-read" in stored.stdout, stored.stdout + stored.stderr
