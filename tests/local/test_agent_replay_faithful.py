"""``--record`` then ``replay:`` reproduces a grammar run attempt for attempt, side
requests included, on every transport (issue 46): the bundled SmolLM2-135M runs a
short task in process under its grammar with the run recorded, then the recording is
replayed, and both runs must have stored the same attempts (kind, number, reply,
verdict, codes), the same tool calls and the same outcome.

Before, the replay was unconstrained: it sent no first-tool side request, so the side
reply ("read_file") answered the transport's first request (``XCT_INVALID``, a repair
the real run never had), and a native run whose tools went in the prompt was replayed
as if they had gone as definitions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolwire.agent import AGENT_TRANSPORTS, prepare_agent_run, run_agent

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
_IDS = re.compile(r"ai-agent-[0-9a-f]{8}|\b[0-9a-f]{8}-\d{3}-(?:\d+|first_tool)\b")


def _spec(tmp: Path, transport: str) -> Path:
    model = {"name": "llamacpp:smollm2-135m", "constrain": "grammar", "temperature": 0.0,
             "max_tokens": 96}  # fmt: skip
    spec = tmp / f"faithful-{transport}.yaml"
    spec.write_text(
        f"""name: faithful-replay
version: "1"
transport: {transport}
model: {json.dumps(model)}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: "Read city.txt and write the city's name into answer.txt."
tools:
  - {{name: list_dir, description: List a folder., implementation: "builtin:list_dir"}}
  - {{name: read_file, description: Read a file., implementation: "builtin:read_file"}}
  - {{name: write_file, description: Write a file., implementation: "builtin:write_file"}}
constraints:
  max_iterations: 2
  context_window_tokens: 4096
checks:
  - {{file: answer.txt, contains: Paris}}
""",
        encoding="utf-8",
    )
    return spec


def _run(tmp: Path, name: str, spec: Path, **kwargs: Any) -> tuple[Any, Any]:
    ws = tmp / name
    ws.mkdir()
    (ws / "city.txt").write_text("Paris\n", encoding="utf-8")
    ctx = prepare_agent_run(spec, workspace=ws, db=tmp / f"{name}.duckdb", **kwargs)
    try:
        return ctx, run_agent(ctx)
    finally:
        ctx.provider.close()


def _attempts(result: Any) -> list[tuple[Any, ...]]:
    return [
        (
            a.turn,
            a.attempt,
            a.kind,
            _IDS.sub("ID", a.raw_text),
            a.parse_ok,
            a.error_code,
            tuple(a.error_codes),
            a.finish_reason,
        )  # fmt: skip
        for a in result.attempts
    ]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("transport", AGENT_TRANSPORTS)
def test_a_recorded_grammar_run_replays_attempt_for_attempt(tmp_path: Path, transport: str) -> None:
    script = tmp_path / "recorded.jsonl"
    real_ctx, real = _run(tmp_path, "real", _spec(tmp_path, transport), record=script)
    assert real_ctx.use_grammar
    assert any(a.kind == "first_tool" for a in real.attempts)  # a side request was made
    replay_ctx, replayed = _run(
        tmp_path, "replay", _spec(tmp_path, transport), model=f"replay:{script}"
    )
    assert replay_ctx.use_grammar and replay_ctx.tools_in_prompt == real_ctx.tools_in_prompt
    assert _attempts(replayed) == _attempts(real)
    calls = [(r["turn"], r["tool"], r["status"], r["error"]) for r in real.tool_calls]
    assert [(r["turn"], r["tool"], r["status"], r["error"]) for r in replayed.tool_calls] == calls
    assert (replayed.status, replayed.error_code) == (real.status, real.error_code)
    assert replay_ctx.provider.remaining == 0  # every recorded line was read
