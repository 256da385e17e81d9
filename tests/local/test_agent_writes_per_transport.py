"""Writes go where the task allows, on every transport (issue 46): a model that writes
the file its goal only asks to read is refused (``WRITE_TARGET_REFUSED``), the file
keeps its bytes, and the file the goal asks for is written and checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import AGENT_TRANSPORTS, prepare_agent_run, run_agent

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
GOAL = "Read city.txt and write the city's name into answer.txt."


def _calls(transport: str, calls: list[tuple[str, dict[str, Any]]], reply: int) -> dict[str, Any]:
    """Model reply ``reply`` (0-based) making ``calls`` over ``transport`` (xml: its slots
    are numbered on from the 4 per reply before it; xct: one call per reply)."""
    if transport in ("native", "xml-final"):
        return {
            "text": "",
            "tool_calls": [
                {"id": f"c{i}", "name": t, "arguments": a} for i, (t, a) in enumerate(calls)
            ],
        }
    if transport == "xml":
        slots = [
            f'<{{{{nonce}}}}-{n:04d} tool="{t}">{json.dumps(a)}</{{{{nonce}}}}-{n:04d}>'
            for n, (t, a) in enumerate(calls, start=4 * reply + 1)
        ]
        return {"text": "\n".join(slots)}
    if transport == "execute":
        items = [{"name": t, "args": a} for t, a in calls]
        return {"text": f"<execute>{json.dumps(items)}</execute>"}
    ((tool, args),) = calls
    return {"text": json.dumps({"next_step": {"tool": tool, "arguments": args, "goal": "g"}})}


def _final(transport: str, text: str) -> dict[str, Any]:
    if transport == "native":
        args = {"status": "success", "report": text}
        call = {"id": "f", "name": "agent__final_report", "arguments": args}
        return {"text": "", "tool_calls": [call]}
    if transport in ("xml", "xml-final"):
        tag = "{{nonce}}-FINAL"
        return {"text": f'<{tag} status="success" format="text">{text}</{tag}>'}
    if transport == "execute":
        return {"text": text}
    return {"text": json.dumps({"done": True, "message": text})}


def _script(transport: str) -> list[dict[str, Any]]:
    read = ("read_file", {"path": "city.txt"})
    overwrite = ("write_file", {"path": "city.txt", "content": "Oslo"})
    answer = ("write_file", {"path": "answer.txt", "content": "Paris"})
    if transport == "xct":  # one decision per reply
        steps = [_calls(transport, [c], i) for i, c in enumerate((read, overwrite, answer))]
    else:
        steps = [_calls(transport, [read, overwrite], 0), _calls(transport, [answer], 1)]
    return [*steps, _final(transport, "The city is Paris.")]


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_the_input_is_not_overwritten_on_any_transport(tmp_path: Path, transport: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "city.txt").write_text("Paris\n", encoding="utf-8")
    lines = "".join(json.dumps(line) + "\n" for line in _script(transport))
    (tmp_path / "script.jsonl").write_text(lines, encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: write-targets
version: "1"
transport: {transport}
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: "{GOAL}"
tools:
  - {{name: read_file, description: Read a file., implementation: "builtin:read_file"}}
  - {{name: write_file, description: Write a file., implementation: "builtin:write_file"}}
checks:
  - {{file: answer.txt, contains: Paris}}
  - {{file: city.txt, contains: Paris}}
""",
        encoding="utf-8",
    )
    ctx = prepare_agent_run(spec, workspace=ws, db=tmp_path / "store.duckdb")
    try:
        result = run_agent(ctx)
    finally:
        ctx.provider.close()
    assert (ws / "city.txt").read_text(encoding="utf-8") == "Paris\n"
    assert (ws / "answer.txt").read_text(encoding="utf-8") == "Paris"
    writes = [r for r in result.tool_calls if r["tool"] == "write_file"]
    rows = [(r["tool"], r["status"], r["error"]) for r in writes]
    assert rows == [
        ("write_file", "invalid", "WRITE_TARGET_REFUSED: city.txt"),
        ("write_file", "success", None),
    ]
    assert result.status == "ok", result.error_message
