"""Tool agents end to end: the same task over all five agent transports, stored in DuckDB.

Each shipped spec ``specs/agent-<transport>.yaml`` runs on a copy of
``tests/data/tools/scratch`` with its replay script
``tests/data/replay/agent-<transport>.jsonl``; ``tests/data/tools/agent_runs.json``
holds what every run must store: the final report, one row per tool call
(``[turn, tool, command, source, status, error code, slot]``; ``{nonce}`` in a
slot is the run's nonce) and one row per attempt (``[turn, attempt, kind,
parse_ok, error_code]``). Further runs use small specs written here to reach
the loop's edges (iteration limit, repair budget, JSON reports, provider
faults), then the Prefect flow and one run of the bundled local model.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import AGENT_TRANSPORTS, prepare_agent_run, run_agent
from toolwire.errors import UsageError
from toolwire.store import Store

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SCRATCH = DATA / "tools" / "scratch"
EXPECTED = json.loads((DATA / "tools" / "agent_runs.json").read_text("utf-8"))
INDEX = (
    "<!-- index of notes/ -->\n"
    "- notes/alpha.md: Alpha project\n"
    "- notes/archive/2023-meeting.md: (no heading)\n"
    "- notes/beta.md: Beta release checklist\n"
)
_NONCE = re.compile(r"ai-agent-[0-9a-f]{8}\Z")


def _scratch(tmp: Path, name: str = "ws") -> Path:
    return Path(shutil.copytree(SCRATCH, tmp / name))


def _run_shipped(transport: str, tmp: Path, db: Path, **kwargs: Any) -> Any:
    ctx = prepare_agent_run(
        REPO / "specs" / f"agent-{transport}.yaml",
        workspace=_scratch(tmp, f"ws-{transport}"),
        db=db,
        model=f"replay:{DATA / 'replay' / f'agent-{transport}.jsonl'}",
        **kwargs,
    )
    try:
        return ctx, run_agent(ctx)
    finally:
        ctx.provider.close()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every transport's shipped spec run once, all into one store."""
    tmp = tmp_path_factory.mktemp("agents")
    db = tmp / "store.duckdb"
    runs = {t: _run_shipped(t, tmp, db) for t in AGENT_TRANSPORTS}
    return {"db": db, "tmp": tmp, "runs": runs}


def _rows(store: Store, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return store.query(sql, list(params))[1]


# ---------------------------------------------------------------- the same task, five transports


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_task_ends_ok_with_the_index_written(shipped: dict[str, Any], transport: str) -> None:
    ctx, result = shipped["runs"][transport]
    expected = EXPECTED[transport]["final"]
    assert (result.status, result.error_code) == ("ok", None)
    report = result.final_report
    metadata = dict(report.metadata)
    quoted = metadata.pop("tool_results")  # agent.quotes: the system quotes the last results
    assert {"status": report.status, "content": report.content, "metadata": metadata} == {
        k: expected[k] for k in ("status", "content", "metadata")
    }
    assert quoted[-1].startswith('- write_file {"path": "index.md"')
    assert (ctx.workspace_root / "index.md").read_text("utf-8") == INDEX
    store = Store(shipped["db"])
    run = store.get_run(result.run_id)
    assert (run["job"], run["transport"], run["status"], run["provider"]) == (
        "agent",
        transport,
        "ok",
        "replay",
    )
    assert run["turns"] == result.turns == len({a[0] for a in EXPECTED[transport]["attempts"]})


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_every_call_refusal_and_final_report_is_a_tool_calls_row(
    shipped: dict[str, Any], transport: str
) -> None:
    _, result = shipped["runs"][transport]
    rows = _rows(
        Store(shipped["db"]),
        "select seq, turn, tool, command, source, status, error, slot, args_bytes, result_bytes "
        "from tool_calls where run_id = ? order by seq",
        result.run_id,
    )
    assert [r[0] for r in rows] == list(range(len(rows)))
    nonce = next((r[7].rsplit("-", 1)[0] for r in rows if r[7] and r[4] == "xml"), None)
    if transport in ("xml", "xml-final"):
        assert nonce is not None and _NONCE.match(nonce)
    got = [
        [turn, tool, command, source, status, error.split(": ", 1)[0] if error else None, slot]
        for _, turn, tool, command, source, status, error, slot, _, _ in rows
    ]
    want = [
        [*row[:6], row[6].replace("{nonce}", nonce) if row[6] and nonce else row[6]]
        for row in EXPECTED[transport]["tool_calls"]
    ]
    assert got == want
    ran = [r for r in rows if r[5] in ("success", "failure")]
    assert all(r[8] > 0 and r[9] > 0 for r in ran)  # arguments and results are measured


@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_every_attempt_is_stored_with_its_raw_text(shipped: dict[str, Any], transport: str) -> None:
    _, result = shipped["runs"][transport]
    rows = _rows(
        Store(shipped["db"]),
        "select turn, attempt, kind, parse_ok, error_code, raw_text, prompt_json "
        "from attempts where run_id = ? order by turn, attempt",
        result.run_id,
    )
    assert [list(r[:5]) for r in rows] == EXPECTED[transport]["attempts"]
    assert all(r[5] for r in rows)
    assert all(json.loads(r[6])[0]["role"] == "system" for r in rows)


def test_stats_views_compare_the_transports(shipped: dict[str, Any]) -> None:
    store = Store(shipped["db"])
    repair = _rows(
        store,
        "select transport, turns, first_try_valid, repairs, repaired_turns, failed_turns "
        "from repair_stats order by transport",
    )
    assert repair == [
        ("execute", 4, 3, 1, 1, 0),
        ("native", 5, 5, 0, 0, 0),
        ("xct", 7, 6, 1, 1, 0),
        ("xml", 4, 3, 1, 1, 0),
        ("xml-final", 4, 4, 0, 0, 0),
    ]
    tools = dict(
        ((tool, source), (calls, failures))
        for tool, source, calls, failures in _rows(
            store, "select tool, source, calls, failures from tool_stats where tool = 'read_file'"
        )
    )
    # native: 4 native + 4 xml-final reads; xml: 4 + a wrong nonce (xml), xml-final's refused
    # tag, 4 execute reads; json: 4 xct reads. Failures: each run's missing file + refused tags.
    assert tools == {
        ("read_file", "native"): (8, 2),
        ("read_file", "xml"): (10, 4),
        ("read_file", "json"): (4, 1),
    }
    finals = _rows(
        store,
        "select command, source, count(*) from tool_calls where tool = 'agent__final_report' "
        "group by all order by all",
    )
    assert finals == [
        ("agent__final_report", "json", 1),
        ("agent__final_report", "native", 1),
        ("agent__final_report", "xml", 1),
        ("agent__final_report_xml", "xml", 2),
    ]


def test_report_holds_the_final_report_and_every_call(shipped: dict[str, Any]) -> None:
    _, result = shipped["runs"]["xml"]
    text = result.report_path.read_text("utf-8")
    assert "Wrote index.md: 3 markdown files" in text
    assert "WRONG_NONCE" in text and "agent__final_report_xml" in text
    assert "Listing the notes folder" in text  # the PROGRESS slot
    stored = _rows(
        Store(shipped["db"]), "select markdown from reports where run_id = ?", result.run_id
    )
    assert stored == [(text,)]


# ---------------------------------------------------------------- the loop's edges


def _spec(
    tmp: Path,
    transport: str,
    script: list[Any],
    extra: str = "",
    model: str = "replay:script.jsonl",
) -> Path:
    lines = [s if isinstance(s, str) else json.dumps(s) for s in script]
    (tmp / "script.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = tmp / f"agent-{transport}-test.yaml"
    spec.write_text(
        f"""name: agent-test
version: "1"
transport: {transport}
model: {model}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: Write index.md listing the notes.
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
{extra}""",
        encoding="utf-8",
    )
    return spec


def _run(tmp: Path, spec: Path, **kwargs: Any) -> tuple[Any, Any]:
    ctx = prepare_agent_run(spec, workspace=_scratch(tmp), db=tmp / "store.duckdb", **kwargs)
    return ctx, run_agent(ctx)


def _step(tool: str, args: dict[str, Any]) -> dict[str, str]:
    return {"text": json.dumps({"next_step": {"tool": tool, "arguments": args, "goal": "g"}})}


def test_no_final_report_within_max_iterations_fails(tmp_path: Path) -> None:
    script = [_step("list_dir", {"path": "notes"})] * 3
    spec = _spec(tmp_path, "xct", script, "constraints:\n  max_iterations: 3\n")
    ctx, result = _run(tmp_path, spec)
    assert (result.status, result.error_code) == ("Failed", "AGENT_MAX_ITERATIONS")
    assert len(result.attempts) == 3 and result.final_report is None
    assert _rows(ctx.store, "select status, error_code from runs") == [
        ("Failed", "AGENT_MAX_ITERATIONS")
    ]
    assert _rows(ctx.store, "select count(*) from tool_calls") == [(3,)]


def test_xml_unusable_answers_beyond_the_repair_budget_fail_the_run(tmp_path: Path) -> None:
    script = [{"text": "I will now list the folder."}] * 3 + [{"text": "never read"}]
    spec = _spec(tmp_path, "xml", script, "constraints:\n  max_repair_retries: 2\n")
    ctx, result = _run(tmp_path, spec)
    assert (result.status, result.error_code) == ("Failed", "AGENT_NO_ACTION")
    assert [(a.turn, a.attempt, a.kind) for a in result.attempts] == [
        (0, 0, "initial"),
        (0, 1, "repair"),
        (0, 2, "repair"),
    ]
    # The error went back to the model each time, as the next input.
    last_prompt = result.attempts[-1].prompt
    assert "AGENT_NO_ACTION" in last_prompt[-2]["content"]


def test_xct_errors_are_results_not_a_repair_budget(tmp_path: Path) -> None:
    script = [{"text": "not json"}] * 3 + [{"text": json.dumps({"done": True, "message": "ok"})}]
    spec = _spec(tmp_path, "xct", script, "constraints:\n  max_repair_retries: 1\n")
    ctx, result = _run(tmp_path, spec)
    assert (result.status, result.final_report.content) == ("unchecked", "ok")  # no check
    assert [a.kind for a in result.attempts] == ["initial", "repair", "repair", "repair"]
    replies = [m["content"] for m in result.attempts[-1].prompt if m["role"] == "user"][1:]
    assert [json.loads(r)["status"] for r in replies] == ["error"] * 3
    assert _rows(ctx.store, "select status, error from tool_calls order by seq") == [
        ("invalid", "NOT_JSON")
    ] * 3 + [("success", None)]


def test_json_final_report_is_validated_then_repaired(tmp_path: Path) -> None:
    final = '<{{nonce}}-FINAL status="success" format="json">%s</{{nonce}}-FINAL>'
    script = [{"text": final % '{"files": "three"}'}, {"text": final % '{"files": 3}'}]
    extra = (
        "final_report:\n  format: json\n  schema:\n    type: object\n"
        "    properties: {files: {type: integer}}\n    required: [files]\n"
        "checks:\n  - answer_schema: {type: object, properties: {files: {minimum: 3}}}\n"
    )
    ctx, result = _run(tmp_path, _spec(tmp_path, "xml", script, extra))
    assert result.status == "ok"  # the answer check held
    assert (result.final_report.format, result.final_report.content) == ("json", {"files": 3})
    assert [(a.kind, a.error_code) for a in result.attempts] == [
        ("initial", "FINAL_REPORT_INVALID"),
        ("repair", None),
    ]
    assert _rows(ctx.store, "select command, status, error from tool_calls order by seq") == [
        ("agent__final_report_xml", "invalid", "FINAL_REPORT_INVALID"),
        ("agent__final_report_xml", "success", None),
    ]
    assert "does not match the schema" in result.attempts[1].prompt[-2]["content"]


def test_tool_output_over_the_context_budget_is_replaced(tmp_path: Path) -> None:
    script = [
        _step("read_file", {"path": "notes/alpha.md"}),
        {"text": '{"done": true, "message": "x"}'},
    ]
    extra = "constraints:\n  context_window_tokens: 100\n"  # the prompt alone fills it
    ctx, result = _run(tmp_path, _spec(tmp_path, "xct", script, extra))
    row = result.tool_calls[0]
    assert (row["status"], row["error"].split(":")[0]) == ("failure", "CONTEXT_BUDGET_EXCEEDED")
    reply = json.loads(result.attempts[1].prompt[-1]["content"])
    assert reply["message"] == "(tool failed: context window budget exceeded)"


def test_provider_fault_fails_the_run_and_keeps_what_was_stored(tmp_path: Path) -> None:
    ctx, result = _run(tmp_path, _spec(tmp_path, "xct", [_step("list_dir", {})]))
    assert (result.status, result.error_code) == ("Failed", "REPLAY_EXHAUSTED")
    assert _rows(ctx.store, "select count(*) from attempts") == [(1,)]
    assert _rows(ctx.store, "select tool, status from tool_calls") == [("list_dir", "success")]


def test_tooling_transport_override_beats_the_spec(tmp_path: Path) -> None:
    script = [{"text": json.dumps({"done": True, "message": "nothing to do"})}]
    spec = _spec(tmp_path, "native", script)
    ctx, result = _run(tmp_path, spec, transport="xct")
    assert (ctx.transport, result.status) == ("xct", "unchecked")
    assert _rows(ctx.store, "select transport from runs") == [("xct",)]


def test_librarian_transport_is_refused_for_an_agent(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "native", [{"text": "x"}])
    with pytest.raises(UsageError, match="xml_attrless"):
        prepare_agent_run(spec, workspace=_scratch(tmp_path), transport="xml_attrless")


# ---------------------------------------------------------------- Prefect and the local model


def test_agent_flow_runs_the_steps_as_prefect_tasks(tmp_path: Path) -> None:
    from toolwire.flows import run_flow
    from toolwire.jobs import JOBS, RunOptions

    db = tmp_path / "store.duckdb"
    seen: list[tuple[int, int]] = []
    options = RunOptions(
        str(REPO / "specs" / "agent-execute.yaml"),
        workspace=str(_scratch(tmp_path)),
        db=str(db),
        model=f"replay:{DATA / 'replay' / 'agent-execute.jsonl'}",
    )
    result = run_flow(JOBS["agent"], options, lambda done, total: seen.append((done, total)))
    assert result.status == "ok"
    assert seen == [(n, 12) for n in range(1, 6)]
    flow_run_id, status = _rows(Store(db), "select flow_run_id, status from runs")[0]
    assert status == "ok" and flow_run_id is not None and len(flow_run_id) == 36


def test_agent_grammars_are_accepted_by_llama_cpp(tmp_path: Path) -> None:
    from toolwire.domain import CompletionRequest
    from toolwire.protocols.execute import execute_grammar
    from toolwire.protocols.slots import slots_grammar
    from toolwire.protocols.xct import xct_grammar
    from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path

    ctx = prepare_agent_run(
        REPO / "specs" / "agent-xct.yaml",
        workspace=_scratch(tmp_path),
        db=tmp_path / "store.duckdb",
        model=f"replay:{DATA / 'replay' / 'agent-xct.jsonl'}",
    )
    tools = ctx.tools.tools
    provider = LlamaCppProvider(resolve_model_path("smollm2-135m", REPO), name="llamacpp:t")
    grammars = {
        "xct": xct_grammar(tools),
        "execute": execute_grammar(tools),
        "xml": slots_grammar(
            nonce="ai-agent-0123abcd",
            slots=["ai-agent-0123abcd-0001", "ai-agent-0123abcd-0002"],
            tools=tools,
        ),
    }
    starts = {"xct": "{", "execute": "<", "xml": "<ai-agent-0123abcd-"}
    for name, grammar in grammars.items():
        request = CompletionRequest(
            messages=[{"role": "user", "content": "List the notes folder."}],
            max_tokens=12,
            grammar=grammar,
        )
        text = provider.complete(request).text  # ProviderError if llama.cpp refused it
        if name != "execute":  # execute may also answer in plain text
            assert text.startswith(starts[name][: len(text)]), (name, text)
    provider.close()


def test_local_model_runs_xct_with_a_grammar_and_stores_every_attempt(tmp_path: Path) -> None:
    # The shipped spec (llamacpp:smollm2-135m, constrain: grammar), with 3 iterations
    # instead of 12 to keep the test short on a CPU.
    text = (REPO / "specs" / "agent-xct.yaml").read_text("utf-8")
    assert "max_iterations: 12" in text and "prompt_pack: agent" in text  # by name: anywhere
    spec = tmp_path / "agent-xct.yaml"
    spec.write_text(
        text.replace("max_iterations: 12", "max_iterations: 3"),
        encoding="utf-8",
    )
    workspace = _scratch(tmp_path)
    ctx = prepare_agent_run(
        spec, workspace=workspace, db=tmp_path / "store.duckdb", model="llamacpp:smollm2-135m"
    )
    assert ctx.use_grammar and ctx.model_cfg.name == "llamacpp:smollm2-135m"
    try:
        result = run_agent(ctx)
    finally:
        ctx.provider.close()
    # Honest status: "ok" only when the spec's checks find the index written in full.
    index = workspace / "index.md"
    if result.ok:
        assert all(f"notes/{n}" in index.read_text("utf-8") for n in ("alpha.md", "beta.md"))
    else:
        assert result.error_code in ("RUN_CHECK_FAILED", "AGENT_MAX_ITERATIONS"), result
    stored = _rows(ctx.store, "select parse_ok, finish_reason from attempts order by turn, attempt")
    assert len(stored) == len(result.attempts) >= 1
    # The grammar admits only valid decisions: every reply the model finished parses.
    assert all(ok for ok, finish in stored if finish == "stop")
    calls = _rows(ctx.store, "select source, status from tool_calls")
    assert calls and all(source == "json" and status != "invalid" for source, status in calls)
