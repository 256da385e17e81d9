"""Tool agents against a real llama.cpp server on 127.0.0.1 (issue 32, the HTTP path).

llama-cpp-python's OpenAI-compatible server drops tool definitions, so
``native`` and ``xml-final`` write the tools into the prompt; under a grammar
the first answer must be a tool call. Here the bundled SmolLM2-135M answers
through the real server, one model call per transport (``max_iterations: 1``):
the request holds every tool, the grammar compiles in the server (an invalid
GBNF kills it), the answer is a call that runs, and the run ends recorded,
never left ``running``. ``max_tokens`` holds the longest answer the grammar
admits (free strings are bounded), so the call is never cut. Slow on a shared
CPU: the prompts are ~700 tokens. The goal asks for a listing: asked to write a
file, the model writes ``</tool_call>`` (or the slot's closing tag) inside the
JSON content, which the grammar admits and the parser reads as the element's
end (a protocols mismatch, reported in issue 32's notes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import LlamaServer, start_llama_server

from toolwire.agent import prepare_agent_run, run_agent

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("list_dir", "read_file", "write_file")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    running = start_llama_server(tmp_path_factory.mktemp("llama_server"), wait_s=180)
    try:
        yield running
    finally:
        running.stop()


def _spec(tmp: Path, transport: str, base_url: str) -> Path:
    model = {"name": "openai:smollm2", "server": "llamacpp", "base_url": base_url,
             "max_tokens": 512, "timeout_s": 600}  # fmt: skip
    tools = "".join(
        f"  - {{name: {t}, description: {t}, implementation: 'builtin:{t}'}}\n" for t in TOOLS
    )
    spec = tmp / f"{transport}.yaml"
    spec.write_text(
        f"""name: served-{transport}
version: "1"
transport: {transport}
model: {json.dumps(model)}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: List the files of the workspace.
tools:
{tools}constraints:
  max_iterations: 1
  max_tool_calls_per_turn: 1
""",
        encoding="utf-8",
    )
    return spec


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("transport", ["native", "xml-final", "xml", "execute", "xct"])
def test_every_transport_sends_its_tools_and_gets_a_call_through_the_server(
    tmp_path: Path, server: LlamaServer, transport: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "readme.md").write_text("# Scratch\n")
    ctx = prepare_agent_run(
        _spec(tmp_path, transport, server.base_url),
        workspace=tmp_path / "ws", db=tmp_path / "store.duckdb",
    )  # fmt: skip
    try:
        result = run_agent(ctx)
    finally:
        ctx.provider.close()
    # The first-tool side request is an attempt row of its own (kind first_tool).
    (attempt,) = [a for a in result.attempts if a.kind != "first_tool"]
    prompt = json.dumps(attempt.prompt)
    for tool in TOOLS:  # in the prompt, or (nowhere for this server) as definitions
        assert tool in prompt, (transport, tool)
    assert attempt.parse_ok, attempt.raw_text  # under the grammar: a call, not prose
    assert [r["status"] for r in result.tool_calls][:1] in (["success"], ["failure"])
    assert result.status == "Failed" and result.error_code == "AGENT_MAX_ITERATIONS"
    status = ctx.store.query("select status from runs where run_id = ?", [ctx.run_id])[1]
    assert status == [("Failed",)]
