"""``tool_choice`` is sent where the API takes it, and recorded with the run (issue 32 item 6).

Seed 001: with tools the model may call them or answer (``auto``). OpenAI's API
gets the field; vLLM refuses ``auto`` unless started with
``--enable-auto-tool-choice`` and the other local servers ignore it, so they
do not. The request the engine builds carries it whenever tools travel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from toolwire.agent.context import _tool_choice, load_agent_context
from toolwire.agent.loop import render_first_request
from toolwire.providers.openai_compat import OpenAIProvider
from toolwire.spec.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def _ok(request: httpx2.Request) -> httpx2.Response:
    _ok.bodies.append(json.loads(request.content))  # type: ignore[attr-defined]
    body = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "done"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip
    return httpx2.Response(200, json=body)


def _first_body(tmp_path: Path, transport: str, server: str) -> tuple[dict[str, Any], Any]:
    ctx = load_agent_context(
        REPO / "specs" / f"agent-{transport}.yaml",
        workspace=tmp_path, model="openai:m", settings=Settings(),
    )  # fmt: skip
    ctx.model_cfg = ctx.model_cfg.model_copy(update={"server": server})
    _ok.bodies = []  # type: ignore[attr-defined]
    client = httpx2.Client(transport=httpx2.MockTransport(_ok))
    provider = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", server=server,
                              http_client=client)  # fmt: skip
    try:
        provider.complete(render_first_request(ctx))
    finally:
        provider.close()
    return _ok.bodies[0], ctx  # type: ignore[attr-defined]


@pytest.mark.parametrize("transport", ["native", "xml-final"])
@pytest.mark.parametrize(("server", "sent"), [("openai", "auto"), ("vllm", None), ("ollama", None)])
def test_tool_choice_goes_where_the_api_takes_it(
    tmp_path: Path, transport: str, server: str, sent: str | None
) -> None:
    body, ctx = _first_body(tmp_path, transport, server)
    assert body["tools"]
    assert body.get("tool_choice") == sent
    assert _tool_choice(ctx) == sent  # what the run records in runs.settings_json


def test_no_tool_choice_without_tools(tmp_path: Path) -> None:
    body, ctx = _first_body(tmp_path, "xct", "openai")
    assert "tools" not in body and "tool_choice" not in body
    assert _tool_choice(ctx) is None
