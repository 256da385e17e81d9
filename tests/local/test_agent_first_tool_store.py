"""The first-tool side request keeps its raw text: a real run of the bundled model.

Under a grammar the first call's tool is chosen in a short side request
(``agent.first_tool``); its reply is stored as an attempt of its own (kind
``first_tool``, attempt -1, before the turn's first try), with its own prompt,
tokens and latency, and the transport's attempt keeps only its own. Here the
bundled SmolLM2-135M answers in process under the grammar (one iteration: the
side request, then the call), and the store must hold every reply exactly as
the model returned it, tokens counted once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import html as lxml_html

from toolwire.agent import prepare_agent_run, run_agent
from toolwire.agent.first_tool import FIRST_TOOL_KIND, SIDE_ATTEMPT
from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import ProviderError
from toolwire.htmlreport import write_html_report

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("list_dir", "read_file", "write_file")


def _spec(tmp: Path) -> Path:
    model = {"name": "llamacpp:smollm2-135m", "constrain": "grammar", "temperature": 0.0,
             "max_tokens": 256}  # fmt: skip
    tools = "".join(
        f"  - {{name: {t}, description: {t}, implementation: 'builtin:{t}'}}\n" for t in TOOLS
    )
    spec = tmp / "first-tool.yaml"
    spec.write_text(
        f"""name: first-tool-store
version: "1"
transport: xct
model: {json.dumps(model)}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: List the files of the workspace.
tools:
{tools}constraints:
  max_iterations: 1
  max_tool_calls_per_turn: 1
  context_window_tokens: 4096
""",
        encoding="utf-8",
    )
    return spec


@pytest.mark.timeout(1800)
def test_the_side_requests_reply_is_stored_as_its_own_attempt(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "readme.md").write_text("# Scratch\n")
    ctx = prepare_agent_run(_spec(tmp_path), workspace=tmp_path / "ws", db=tmp_path / "s.duckdb")
    assert ctx.use_grammar
    replies: list[Completion] = []  # what the model returned, in the order asked

    def model(request: CompletionRequest) -> Completion:
        assert ctx.provider is not None
        replies.append(ctx.provider.complete(request))
        return replies[-1]

    try:
        result = run_agent(ctx, call=model)
    finally:
        ctx.provider.close()
    assert result.error_code == "AGENT_MAX_ITERATIONS", result.error_message  # one iteration

    cols, rows = ctx.store.query(
        "select turn, attempt, kind, raw_text, parse_ok, input_tokens, output_tokens, "
        "latency_ms, prompt_json from attempts where run_id = ? order by turn, attempt",
        [ctx.run_id],
    )
    stored = [dict(zip(cols, row, strict=True)) for row in rows]
    assert len(replies) == 2 and len(stored) == 2  # two decodes, two rows, one iteration
    side, first = stored
    assert (side["turn"], side["attempt"], side["kind"]) == (0, SIDE_ATTEMPT, FIRST_TOOL_KIND)
    assert (first["turn"], first["attempt"], first["kind"]) == (0, 0, "initial")
    # Each row is its own reply, byte for byte, with its own cost.
    for row, reply in zip(stored, replies, strict=True):
        assert row["raw_text"] == reply.text
        assert (row["input_tokens"], row["output_tokens"]) == (
            reply.input_tokens,
            reply.output_tokens,
        )
        assert row["latency_ms"] == pytest.approx(reply.latency_ms)
    # The side reply names a tool (the grammar admits nothing else) and steered the call.
    chosen = side["raw_text"].strip()
    assert chosen in TOOLS and side["parse_ok"]
    assert json.loads(first["raw_text"])["next_step"]["tool"] == chosen
    assert "Tool:" in json.loads(side["prompt_json"])[-1]["content"]
    assert [(a.attempt, a.kind) for a in result.attempts] == [(-1, "first_tool"), (0, "initial")]

    # Per-run totals: the sum over attempt rows is what the model was asked for, once.
    summary = ctx.store.query(
        "select input_tokens, output_tokens, attempts from run_summary where run_id = ?",
        [ctx.run_id],
    )[1]
    assert summary == [
        (
            sum(r.input_tokens or 0 for r in replies),
            sum(r.output_tokens or 0 for r in replies),
            2,
        )
    ]
    assert all((r.input_tokens or 0) > 0 for r in replies)
    # The side request is not a turn of its own, nor a valid try of the turn.
    turns = ctx.store.query("select turns, first_try_valid from repair_stats")[1]
    assert turns == [(1, 1 if first["parse_ok"] else 0)]


def test_a_provider_fault_after_the_side_request_keeps_its_reply(tmp_path: Path) -> None:
    """The side reply is durable before the transport's request is sent: a fault there
    ends the run Failed with the side request stored, and no turn counted for it."""
    (tmp_path / "ws").mkdir()
    ctx = prepare_agent_run(_spec(tmp_path), workspace=tmp_path / "ws", db=tmp_path / "s.duckdb")
    asked: list[CompletionRequest] = []

    def model(request: CompletionRequest) -> Completion:  # no model load: the store is real
        asked.append(request)
        if len(asked) == 1:
            return Completion(text="list_dir", input_tokens=90, output_tokens=2, latency_ms=5.0)
        raise ProviderError("connection dropped", code="LLM_PROVIDER_UNREACHABLE")

    try:
        result = run_agent(ctx, call=model)
    finally:
        ctx.provider.close()
    assert (result.status, result.error_code) == ("Failed", "LLM_PROVIDER_UNREACHABLE")
    assert len(asked) == 2 and asked[1].grammar is not None
    assert "list_dir" in asked[1].grammar and "write_file" not in asked[1].grammar
    rows = ctx.store.query(
        "select kind, attempt, raw_text, input_tokens, output_tokens from attempts"
    )[1]
    assert rows == [("first_tool", -1, "list_dir", 90, 2)]
    run = ctx.store.query("select status, turns from runs where run_id = ?", [ctx.run_id])[1]
    assert run == [("Failed", 0)]
    # The run's reports show it: the markdown report's attempts table, the HTML page.
    (markdown,) = ctx.store.query("select markdown from reports where run_id = ?", [ctx.run_id])[1]
    assert "| 1 | -1 | first_tool | yes |" in markdown[0]
    page = write_html_report(ctx.store, tmp_path / "report.html", run_id=ctx.run_id)
    doc = lxml_html.fromstring(page.read_text(encoding="utf-8"))
    (shown,) = doc.xpath('//details[contains(@class, "attempt")]')
    summary = shown.xpath("summary")[0].text_content()
    assert summary.startswith("turn 1, first-tool choice: valid; tokens in/out 90/2")
    assert shown.xpath('.//pre[contains(@class, "raw")]')[0].text_content() == "list_dir"
