"""Native replies read by ``toolwire parse --transport native --spec``: the engine's verdict.

Vectors in tests/data/native/{valid,invalid}/NAME.txt: the assistant's reply
(plain text, or the message as JSON with ``tool_calls``). NAME.json holds the
options (``finish_reason``, default "stop"; ``spec``, default
specs/agent-native.yaml) and ``expected``: the exit code and the ``turn`` the
engine would make of the reply (calls with their accounting ``source``,
refusals, final report, error code, recorded codes). A valid vector exits 0;
an invalid one exits 1. Covers tool calls leaked as text in their five shapes
and the stop reasons (``max_tokens``/``length``, ``end_turn``, ``content_filter``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwire.cli import app

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "native"
VECTORS = sorted(DATA.glob("*/*.txt"))


def _options(path: Path) -> dict[str, Any]:
    side = path.with_suffix(".json")
    return json.loads(side.read_text("utf-8")) if side.exists() else {}


def run_parse(path: Path) -> tuple[int, dict[str, Any]]:
    options = _options(path)
    spec = ROOT / options.get("spec", "specs/agent-native.yaml")
    args = ["parse", "--transport", "native", "--spec", str(spec), str(path)]
    args += ["--finish-reason", options.get("finish_reason", "stop")]
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def summary(out: dict[str, Any]) -> dict[str, Any]:
    """The parts of the output a vector pins down."""
    turn = out.get("turn")
    if turn is None:
        return {"ok": out["ok"], "error": out["error"]["code"]}
    final = turn["final"]
    return {
        "ok": out["ok"],
        "calls": [{k: c[k] for k in ("tool", "args", "source")} for c in turn["calls"]],
        "rejected": [r["code"] for r in turn["rejected"]],
        "refused_before_running": [r["code"] for r in turn["refused_before_running"]],
        "final": None
        if final is None
        else {k: final[k] for k in ("content", "metadata", "source")},
        "error": None if turn["error"] is None else turn["error"]["code"],
        "codes": turn["codes"],
    }


def test_there_are_vectors_for_every_leaked_shape_and_stop_reason() -> None:
    assert {p.parent.name for p in VECTORS} == {"valid", "invalid"}
    sources = {c["source"] for p in VECTORS for c in _options(p)["expected"].get("calls", [])}
    assert sources == {"leaked"}
    text = " ".join(p.read_text("utf-8") for p in VECTORS)
    for tag in ("<tool_call>", "<tool_calls>", "<tools>", "<function_call>", "<invoke "):
        assert tag in text
    reasons = {_options(p).get("finish_reason", "stop") for p in VECTORS}
    assert {"stop", "max_tokens", "end_turn", "content_filter"} <= reasons


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_native_vector(path: Path) -> None:
    code, out = run_parse(path)
    expected = _options(path)["expected"]
    assert code == (0 if path.parent.name == "valid" else 1), out
    assert summary(out) == expected


def test_leaked_calls_are_accounted_with_their_own_source(tmp_path: Path) -> None:
    from toolwire.agent.accounting import ToolLedger
    from toolwire.agent.context import load_agent_context
    from toolwire.agent.loop import start_agent
    from toolwire.agent.turn_reader import read_completion
    from toolwire.domain import Completion
    from toolwire.tools.executor import run_calls

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n", encoding="utf-8")
    ctx = load_agent_context(ROOT / "specs/agent-native.yaml", workspace=tmp_path)
    adapter = start_agent(ctx).adapter
    assert adapter is not None
    text = (
        '<tool_call>{"name": "read_file", "arguments": {"path": "notes/a.md"}}</tool_call>'
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call><tool_call>{bad</tool_call>'
    )
    shown, turn = read_completion(adapter, Completion(text=text))
    ledger = ToolLedger("native")
    outcomes = run_calls(ctx.tools, turn.calls)
    for outcome in outcomes:
        ledger.add_outcome(0, outcome)
    for item in turn.rejected:
        ledger.add_rejected(0, item)
    rows = [(r["tool"], r["source"], r["status"], r["error"]) for r in ledger.rows]
    assert rows == [
        ("read_file", "leaked", "success", None),
        ("nope", "leaked", "invalid", "UNKNOWN_TOOL"),
        (None, "leaked", "invalid", "LEAKED_CALL_INVALID"),
    ]
    # What each call was given and gave back (the HTML report shows them per call).
    texts = [(r["args_json"], r["result_text"]) for r in ledger.rows]
    assert texts[0] == ('{"path": "notes/a.md"}', "# A\n")
    assert texts[1] == ("{}", "unknown tool 'nope'; available tools: " + ", ".join(ctx.tools))
    assert texts[2][0] is None and "the content is not JSON" in texts[2][1]
    adapter.record(shown, turn, outcomes)
    feedback = adapter.history[-1]  # type: ignore[attr-defined]
    assert feedback["role"] == "user" and "# A" in feedback["content"]
    assert (
        "native tool calls" in feedback["content"] and "LEAKED_CALL_INVALID" in feedback["content"]
    )
