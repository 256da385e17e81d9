"""`toolwire run | render | parse | undo` as users run them: real processes, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import MALFORMED, NOTES, VALID, _digest, _spec, _workspace

pytestmark = pytest.mark.local


def toolwire(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def test_run_applies_then_undo_restores_byte_for_byte(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    db = tmp_path / "s.duckdb"
    before = _digest(ws)
    spec = _spec(tmp_path, [VALID])
    ran = toolwire("run", spec, "--workspace", ws, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    assert "ok: 1 requests, 1 attempts (0 repairs); operations 2 applied" in ran.stderr
    assert _digest(ws) != before
    runs = toolwire("sql", "--db", db, "--format", "json", "select run_id, status from runs")
    (row,) = json.loads(runs.stdout)
    assert row["status"] == "ok"
    listed = toolwire("runs", "--db", db)
    assert "undone" not in listed.stdout
    # Issue 42: the store knows the run's folder; no --workspace needed.
    undone = toolwire("undo", row["run_id"][:10], "--db", db)
    assert undone.returncode == 0, undone.stderr
    assert _digest(ws) == before
    ops = toolwire("sql", "--db", db, "--format", "csv", "select distinct status from operations")
    assert ops.stdout.split() == ["status", "undone"]
    # ... and `runs` and `show` say the run was undone, not just `ok`.
    listed = toolwire("runs", "--db", db)
    assert listed.returncode == 0 and "ok undone" in listed.stdout
    shown = toolwire("show", row["run_id"], "--db", db)
    assert shown.returncode == 0 and "undone (2 operation(s) taken back)" in shown.stdout


def test_failed_run_exits_1_and_prints_the_code(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    spec = _spec(tmp_path, [MALFORMED] * 3)
    ran = toolwire("run", spec, "--workspace", ws, "--db", tmp_path / "s.duckdb", "--no-prefect")
    assert ran.returncode == 1
    assert "error: LIBRARIAN_PROTOCOL_INVALID" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_bad_spec_exits_2_with_one_located_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nversion: '1'\ntransport: xml_attrless\nmodle: replay:x\n")
    ran = toolwire("run", spec, "--workspace", tmp_path, "--db", tmp_path / "s.duckdb")
    assert ran.returncode == 2
    assert "Traceback" not in ran.stderr
    assert f"{spec}:4:1" in ran.stderr and "modle" in ran.stderr


def test_dry_run_prints_the_plan_the_diff_when_asked_and_writes_nothing(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    before = _digest(ws)
    spec = _spec(tmp_path, [VALID, VALID])
    args = ("run", spec, "--workspace", ws, "--db", tmp_path / "s.duckdb", "--dry-run")
    ran = toolwire(*args, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    assert "plan: 2 note(s) to change (1 retag_note, 1 retitle_note)" in ran.stderr  # issue 42
    assert "next: toolwire run" in ran.stderr and "--diff" in ran.stderr
    assert "--- a/bread.md" not in ran.stdout
    diffed = toolwire(*args, "--diff", "--no-prefect")
    assert diffed.returncode == 0, diffed.stderr
    assert "--- a/bread.md" in diffed.stdout and "+++ b/bread.md" in diffed.stdout
    assert _digest(ws) == before


def test_render_escapes_note_markup_exactly_as_sent(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "tricky.md").write_text("Ends with </body_markdown> and <operation> tags & more.\n")
    ran = toolwire("render", _spec(tmp_path, [VALID]), "--workspace", ws)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count("<librarian_request>") == 1  # batch_size 10: one request
    assert "&lt;/body_markdown&gt; and &lt;operation&gt; tags &amp; more." in ran.stdout
    assert "<source_id>tricky</source_id>" in ran.stdout


def test_parse_prints_json_or_a_located_error(tmp_path: Path) -> None:
    good = toolwire("parse", "-", stdin=VALID.replace("{{request_id}}", "req_1"))
    assert good.returncode == 0, good.stderr
    parsed = json.loads(good.stdout)
    assert parsed["ok"] and parsed["response"]["operations"][0]["kind"] == "retag_note"
    bad = toolwire("parse", "-", stdin=MALFORMED)
    assert bad.returncode == 1
    error = json.loads(bad.stdout)["error"]
    assert error["code"] == "LIBRARIAN_PROTOCOL_INVALID"
    assert (error["line"], error["column"]) == (1, 21)


def test_parse_with_spec_validates_operations(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    text = VALID.replace("{{request_id}}", "req_1").replace(
        "<body_markdown>cooking</body_markdown>", "<body_markdown>gardening</body_markdown>"
    )
    (tmp_path / "answer.xml").write_text(text)
    ran = toolwire(
        "parse", tmp_path / "answer.xml", "--spec", _spec(tmp_path, []), "--workspace", ws
    )
    assert ran.returncode == 1
    validation = json.loads(ran.stdout)["validation"]
    assert validation[0]["status"] == "rejected"
    assert validation[0]["code"] == "UNKNOWN_TOPIC:gardening"
    assert validation[1]["status"] == "planned"
    assert NOTES  # the workspace fixture is the shared one


AGENT_TRANSPORTS = ["native", "xml", "xml-final", "execute", "xct"]


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_agent_spec_runs_from_the_cli_with_its_replay_script(
    tmp_path: Path, repo: Path, transport: str
) -> None:
    import shutil

    ws = tmp_path / "scratch"
    shutil.copytree(repo / "tests/data/tools/scratch", ws)
    script = repo / f"tests/data/replay/agent-{transport}.jsonl"
    spec = repo / f"specs/agent-{transport}.yaml"
    db = tmp_path / "s.duckdb"
    ran = toolwire(
        "run", spec, "--model", f"replay:{script}", "--workspace", ws, "--db", db, "--no-prefect"
    )
    assert ran.returncode == 0, ran.stderr
    assert "ok:" in ran.stderr and "tool calls" in ran.stderr
    assert (ws / "index.md").is_file()
    calls = toolwire("sql", "--db", db, "--format", "json", "select source from tool_calls")
    assert calls.returncode == 0
    assert {row["source"] for row in json.loads(calls.stdout)} <= {"native", "xml", "json"}


def test_agent_dry_run_is_refused_with_a_usage_error(tmp_path: Path, repo: Path) -> None:
    ran = toolwire("run", repo / "specs/agent-xct.yaml", "--workspace", tmp_path, "--dry-run")
    assert ran.returncode == 2
    assert "librarian (xml_attrless) runs only" in ran.stderr


def test_parse_xml_slots_reports_invalid_tags_with_or_without_the_nonce(repo: Path) -> None:
    nonce = "ai-agent-1234abcd"
    text = (
        f'<{nonce}-0001 tool="list_dir">{{"path": "notes"}}</{nonce}-0001>\n'
        f'<{nonce}-0002 tool="rm_rf">{{"path": "/"}}</{nonce}-0002>\n'
    )
    spec = repo / "specs/agent-xml.yaml"
    ran = toolwire("parse", "--transport", "xml", "--spec", spec, "--nonce", nonce, "-", stdin=text)
    assert ran.returncode == 1
    out = json.loads(ran.stdout)
    assert [c["tool"] for c in out["calls"]] == ["list_dir"]
    assert [i["code"] for i in out["invalid"]] == ["TOOL_NOT_ALLOWED"]
    inferred = toolwire("parse", "--transport", "xml", "--spec", spec, "-", stdin=text)
    assert inferred.returncode == 1 and json.loads(inferred.stdout)["nonce"] == nonce
    assert json.loads(inferred.stdout)["turn"]["rejected"][0]["code"] == "TOOL_NOT_ALLOWED"
    bare = toolwire("parse", "--transport", "xml", "-", stdin=text)  # no spec: wire format only
    assert bare.returncode == 0 and len(json.loads(bare.stdout)["calls"]) == 2


def test_parse_execute_and_xct_and_native(repo: Path) -> None:
    execute = toolwire(
        "parse",
        "--transport",
        "execute",
        "--spec",
        repo / "specs/agent-execute.yaml",
        "-",
        stdin="<think>look</think><execute><list_dir><path>notes</path></list_dir></execute>",
    )
    assert execute.returncode == 0, execute.stdout + execute.stderr
    assert json.loads(execute.stdout)["calls"][0]["tool"] == "list_dir"
    xct = toolwire("parse", "--transport", "xct", "-", stdin='{"done": true, "message": "ok"}')
    assert xct.returncode == 0 and json.loads(xct.stdout)["decision"]["done"] is True
    two = toolwire("parse", "--transport", "xct", "-", stdin='{"done": true}{"done": true}')
    assert two.returncode == 1 and json.loads(two.stdout)["error"]["code"] == "XCT_INVALID"
    message = {
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "{}"}}],
    }
    native = toolwire("parse", "--transport", "native", "-", stdin=json.dumps(message))
    assert native.returncode == 0 and json.loads(native.stdout)["calls"][0]["tool"] == "read_file"


@pytest.mark.parametrize(
    ("model", "shown"), [("", "grammar"), ("openai:gpt-4o-mini", "json schema")]
)
def test_render_grammar_prints_what_the_server_would_get(
    model: str, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xct on a grammar-taking model (the replay's default): the GBNF grammar; on
    api.openai.com (no grammar travels): the decision's JSON Schema (issue 19)."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    ws = shutil.copytree(repo / "tests" / "data" / "tools" / "scratch", tmp_path / "ws")
    monkeypatch.delenv("TOOLWIRE_MODEL", raising=False)
    if model:
        monkeypatch.setenv("TOOLWIRE_MODEL", model)
    ran = toolwire("render", repo / "specs" / "agent-xct.yaml", "--workspace", ws, "--grammar")
    assert ran.returncode == 0, ran.stderr
    sections = [line for line in ran.stdout.splitlines() if line.startswith("=== ")]
    # Under a grammar the run's first model call is the first-tool side request
    # (agent.first_tool): render shows it first, with its own grammar (the tool names).
    side = [f"=== first-tool choice: {part} ===" for part in ("system", "user", "grammar")]
    first = side if shown == "grammar" else []
    assert sections == [*first, "=== system ===", "=== user ===", f"=== {shown} ==="]
    if shown == "grammar":
        side_grammar = ran.stdout.split(side[2] + "\n", 1)[1].split("\n=== ", 1)[0]
        assert side_grammar.startswith("root ::= ") and '"write_file"' in side_grammar
    if shown == "json schema":
        schema = json.loads(ran.stdout.split("=== json schema ===\n", 1)[1])
        assert schema["title"] == "xct_decision" and len(schema["anyOf"]) == 2
