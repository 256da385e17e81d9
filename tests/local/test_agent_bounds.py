"""The agent loop's bounds beyond max_iterations (issue 32): the loop guard and the history.

A model that repeats a call that already gave its answer, or a failure already
reported, is told so, and a run that keeps repeating ends ``Failed`` with
``AGENT_LOOP_DETECTED`` well before ``max_iterations``. Old tool results are
compacted in the context (kept whole in the store), so ten reads of 3.6 KB
files fit a 4,096-token window. Replay scripts stand in for the model; the
store is a real DuckDB file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import prepare_agent_run, run_agent
from toolwire.agent.history import message_tokens
from toolwire.agent.loop_guard import MAX_REPEATS_IN_A_ROW

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
WINDOW = 4096


def _spec(tmp: Path, transport: str, script: list[Any], extra: str = "") -> Path:
    lines = [json.dumps(s) for s in script]
    (tmp / "script.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = tmp / f"agent-{transport}.yaml"
    spec.write_text(
        f"""name: agent-bounds
version: "1"
transport: {transport}
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: Read the notes, then write summary.md.
tools:
  - name: list_dir
    description: List a folder.
    implementation: builtin:list_dir
  - name: read_file
    description: Read a file.
    implementation: builtin:read_file
  - name: write_file
    description: Write a file.
    implementation: builtin:write_file
constraints:
  max_iterations: 14
  context_window_tokens: {WINDOW}
{extra}""",
        encoding="utf-8",
    )
    return spec


def _workspace(tmp: Path, files: int = 2, size: int = 200) -> Path:
    root = tmp / "ws"
    (root / "notes").mkdir(parents=True)
    for i in range(files):
        words = " ".join(f"word{i}_{j}" for j in range(size // 10))
        (root / "notes" / f"n{i:02d}.md").write_text(f"# Note {i}\n\n{words[: size - 12]}\n")
    return root


def _run(tmp: Path, spec: Path, workspace: Path) -> tuple[Any, Any]:
    ctx = prepare_agent_run(spec, workspace=workspace, db=tmp / "store.duckdb")
    try:
        return ctx, run_agent(ctx)
    finally:
        ctx.provider.close()


def _step(tool: str, args: dict[str, Any]) -> dict[str, str]:
    return {"text": json.dumps({"next_step": {"tool": tool, "arguments": args, "goal": "g"}})}


def _native(i: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"id": f"c{i}", "name": tool, "arguments": args}]}


DONE = {"text": json.dumps({"done": True, "message": "Done."})}


# ---------------------------------------------------------------- the loop guard


@pytest.mark.parametrize(
    ("name", "reply", "code"),
    [
        ("same call, same result", _step("list_dir", {"path": "notes"}), "REPEATED_CALL"),
        ("same failing call", _step("read_file", {"path": "notes/gone.md"}), "REPEATED_FAILURE"),
        ("same broken answer", {"text": "I will list the notes."}, "REPEATED_ANSWER"),
    ],
)
def test_a_run_that_keeps_repeating_ends_with_its_own_code(
    tmp_path: Path, name: str, reply: dict[str, str], code: str
) -> None:
    ctx, result = _run(tmp_path, _spec(tmp_path, "xct", [reply] * 14), _workspace(tmp_path))
    assert (result.status, result.error_code) == ("Failed", "AGENT_LOOP_DETECTED"), name
    assert len(result.attempts) == 1 + MAX_REPEATS_IN_A_ROW  # well before max_iterations (14)
    told = json.loads(result.attempts[2].prompt[-1]["content"])  # answers the 2nd
    assert told["status"] == "error" and code in json.dumps(told), told
    status = ctx.store.query("select status from runs where run_id = ?", [ctx.run_id])[1]
    assert status == [("Failed",)]


def test_a_call_whose_result_changed_is_not_a_repeat(tmp_path: Path) -> None:
    read = _step("read_file", {"path": "notes/n00.md"})
    script = [
        read,
        _step("write_file", {"path": "notes/n00.md", "content": "# New\n"}),
        read,
        read,  # this one is a repeat: same call, same (new) result
        _step("write_file", {"path": "summary.md", "content": "- notes/n00.md\n"}),
        DONE,
    ]
    spec = _spec(tmp_path, "xct", script)  # a goal that asks to change the note it reads
    text = spec.read_text(encoding="utf-8").replace(
        "goal: Read the notes,", "goal: Update notes/n00.md, read the notes,"
    )
    spec.write_text(text, encoding="utf-8")
    ctx, result = _run(tmp_path, spec, _workspace(tmp_path))
    assert result.status == "unchecked"  # the spec declares no check
    rows = [(r["tool"], r["status"], (r["error"] or "").split(":")[0]) for r in result.tool_calls]
    assert rows[:5] == [
        ("read_file", "success", ""),
        ("write_file", "success", ""),
        ("read_file", "success", ""),
        ("read_file", "failure", "REPEATED_CALL"),
        ("write_file", "success", ""),
    ]


def test_the_guard_works_on_native_tool_calls_too(tmp_path: Path) -> None:
    script = [_native(i, "list_dir", {"path": "notes"}) for i in range(14)]
    ctx, result = _run(tmp_path, _spec(tmp_path, "native", script), _workspace(tmp_path))
    assert (result.status, result.error_code) == ("Failed", "AGENT_LOOP_DETECTED")
    assert "REPEATED_CALL" in result.attempts[2].prompt[-1]["content"]


# ---------------------------------------------------------------- the bounded history


@pytest.mark.parametrize("transport", ["xct", "native"])
def test_ten_mid_size_files_are_read_within_a_4096_token_window(
    tmp_path: Path, transport: str
) -> None:
    workspace = _workspace(tmp_path, files=10, size=3600)
    paths = [f"notes/n{i:02d}.md" for i in range(10)]
    write = {"path": "summary.md", "content": "".join(f"- {p}\n" for p in paths)}
    if transport == "xct":
        script = [_step("read_file", {"path": p}) for p in paths]
        script += [_step("write_file", write), DONE]
    else:
        script = [_native(i, "read_file", {"path": p}) for i, p in enumerate(paths)]
        script += [_native(10, "write_file", write), {"text": "Done."}]
    extra = "checks:\n  - {file: summary.md, lists: 'notes/*.md'}\n"
    ctx, result = _run(tmp_path, _spec(tmp_path, transport, script, extra), workspace)
    assert (result.status, result.error_code) == ("ok", None), result.error_message
    reads = [r for r in result.tool_calls if r["tool"] == "read_file"]
    assert [r["status"] for r in reads] == ["success"] * 10  # no "budget exceeded"
    for attempt in result.attempts:  # every request fits the window by the estimate
        assert sum(message_tokens(m) for m in attempt.prompt) < WINDOW - 256
    last_prompt = json.dumps(result.attempts[-1].prompt)
    assert "left out to keep the conversation within the context window" in last_prompt
    assert "word0_300" not in last_prompt  # the first file's tail is out of the context
    # ... and whole in the store.
    stored = ctx.store.query(
        "select result_text from tool_calls where run_id = ? and tool = 'read_file' "
        "order by seq limit 1",
        [ctx.run_id],
    )[1][0][0]
    assert stored == (workspace / "notes" / "n00.md").read_text()


# ---------------------------------------------------------------- PROGRESS over native calls


@pytest.mark.parametrize("transport", ["native", "xml-final"])
def test_progress_travels_as_a_native_call_in_native_and_xml_final(
    tmp_path: Path, transport: str
) -> None:
    progress = {"id": "p1", "name": "agent__progress", "arguments": {"progress": "listing notes"}}
    listing = {"id": "c1", "name": "list_dir", "arguments": {"path": "notes"}}
    if transport == "native":
        done: dict[str, Any] = {"text": "Listed the notes."}
    else:
        final = '<{{nonce}}-FINAL status="success" format="text">Listed.</{{nonce}}-FINAL>'
        done = {"text": final}
    script = [{"text": "", "tool_calls": [progress, listing]}, done]
    ctx, result = _run(tmp_path, _spec(tmp_path, transport, script), _workspace(tmp_path))
    assert result.status == "unchecked"  # the spec declares no check
    assert result.progress == ["listing notes"]
    assert [r["tool"] for r in result.tool_calls if r["tool"] != "agent__final_report"] == [
        "list_dir"
    ]
    answers = [m for m in result.attempts[1].prompt if m["role"] == "tool"]
    assert [m["content"] for m in answers][0] == "progress noted"
