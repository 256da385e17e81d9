"""Tools reach every prompt (issue 32 item 1), and the prompts hold nothing to copy (item 4).

A model that takes no tool definitions (in process, or llama-cpp-python's
server) gets them written into the system prompt for ``native`` and
``xml-final``, and its ``<tool_call>`` text runs; ``spec check`` and ``run``
say so (``tool_carriage``). The opening prompts of every transport hold no
example value a small model could copy as if it were an answer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolwire.agent.pack import load_agent_pack
from toolwire.agent.transports import make_adapter
from toolwire.agent.transports.base import AgentSetup
from toolwire.domain import Completion
from toolwire.providers.tool_carriage import carries_native_tools, prompt_tools_note
from toolwire.spec.model import ToolSpec
from toolwire.tools import build_registry, run_calls

REPO = Path(__file__).resolve().parents[2]
PACK = load_agent_pack(REPO / "src" / "toolwire" / "prompt_packs" / "agent")
TRANSPORTS = ("native", "xml", "xml-final", "execute", "xct")


def _setup(tmp: Path, transport: str, *, in_prompt: bool = False) -> AgentSetup:
    specs = [
        ToolSpec(name=n, description=f"{n} tool", implementation=f"builtin:{n}")
        for n in ("list_dir", "read_file", "write_file")
    ]
    return AgentSetup(
        transport=transport,
        pack=PACK,
        goal="Write hello.txt.",
        tools=build_registry(specs, workspace=tmp),
        final_format="text",
        final_schema=None,
        max_calls_per_turn=4,
        constraint=None,
        tools_in_prompt=in_prompt,
    )


@pytest.mark.parametrize(
    ("name", "server", "carried"),
    [
        ("llamacpp:smollm2-135m", "openai", False),
        ("openai:smollm2", "llamacpp", False),
        ("openai:gpt-4o-mini", "openai", True),
        ("openai:qwen2.5", "ollama", True),
        ("openai:qwen2.5", "vllm", True),
        ("replay:script.jsonl", "openai", True),
    ],
)
def test_which_models_carry_tool_definitions(name: str, server: str, carried: bool) -> None:
    cfg = SimpleNamespace(name=name, server=server)
    assert carries_native_tools(cfg) is carried
    for transport in TRANSPORTS:
        note = prompt_tools_note(transport, cfg)
        expected = not carried and transport in ("native", "xml-final")
        assert (note is not None) is expected, (transport, name)


@pytest.mark.parametrize("transport", ["native", "xml-final"])
def test_tools_in_the_prompt_are_listed_and_their_text_calls_run(
    tmp_path: Path, transport: str
) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    setup = _setup(tmp_path, transport, in_prompt=True)
    adapter = make_adapter(setup)
    parts = adapter.request()
    assert parts.tools is None  # nothing the provider would drop
    system = parts.messages[0]["content"]
    for tool in ("list_dir", "read_file", "write_file"):
        assert f"- {tool}: {tool} tool" in system
    assert "native tool calls" not in json.dumps(parts.messages)
    call = {"name": "read_file", "arguments": {"path": "a.md"}}
    completion = Completion(text=f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    turn = adapter.parse(completion)
    assert [(c.tool, c.args) for c in turn.calls] == [("read_file", {"path": "a.md"})]
    outcomes = run_calls(setup.tools, turn.calls)
    adapter.record(completion, turn, outcomes)
    follow = adapter.request().messages
    answered = [m["content"] for m in follow if m["role"] == "user"]
    assert any("Results of your tool calls" in t and "# A" in t for t in answered)


def test_xml_final_in_the_prompt_still_ends_with_the_final_tag(tmp_path: Path) -> None:
    adapter = make_adapter(_setup(tmp_path, "xml-final", in_prompt=True))
    adapter.request()
    final = f"{adapter.nonce}-FINAL"  # type: ignore[attr-defined]
    text = f'<{final} status="success" format="text">Wrote hello.txt.</{final}>'
    turn = adapter.parse(Completion(text=text))
    assert turn.final is not None and turn.final.content == "Wrote hello.txt."


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("in_prompt", [False, True])
def test_no_prompt_holds_a_value_a_model_could_copy(
    tmp_path: Path, transport: str, in_prompt: bool
) -> None:
    parts = make_adapter(_setup(tmp_path, transport, in_prompt=in_prompt)).request()
    text = "\n".join(str(m["content"]) for m in parts.messages)
    text += json.dumps(parts.tools or [])
    for copyable in ("notes/a.md", '"your final answer"', "\n...\n", "e.g. "):
        assert copyable not in text, (transport, copyable)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_first_call_calls_and_last_call_ends_in_every_grammar(
    tmp_path: Path, transport: str
) -> None:
    """Until a tool ran the grammar admits calls only (the final-report tool is an
    ending too); on the run's last call it admits the ending only."""
    setup = replace(_setup(tmp_path, transport, in_prompt=True), constraint="grammar")
    adapter = make_adapter(setup)
    adapter.require_call, adapter.require_final = True, False
    first = adapter.request().grammar or ""
    assert "agent__final_report" not in first and "FINAL" not in first.splitlines()[0]
    assert "final-text" not in first.splitlines()[0] and "done" not in first.splitlines()[0]
    adapter.require_call, adapter.require_final = False, True
    last = adapter.request().grammar or ""
    assert "write_file" not in last.splitlines()[0] and "call-" not in last.splitlines()[0]
    assert '"write_file"' not in last or transport in ("xml", "execute", "xct")  # unused rules
