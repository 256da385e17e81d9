"""llama-cpp-python's server gets repeat_penalty 1.0, as the in-process worker does (issue 32).

Its default, 1.1, penalises the tokens the prompt just showed: the bundled
model then wrote "Hello, World!" for a task asking for "hello world". A spec's
``extra_body`` still decides; other servers get nothing added.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.domain import CompletionRequest
from toolwire.providers.openai_compat import OpenAIProvider

pytestmark = pytest.mark.unit

ASK = CompletionRequest(messages=[{"role": "user", "content": "hi"}], grammar='root ::= "x"')


def _body(server: str, **kwargs: Any) -> dict[str, Any]:
    provider = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", server=server, **kwargs)
    return dict(provider.request_params(ASK).get("extra_body") or {})


def test_llamacpp_server_gets_no_repeat_penalty_unless_the_spec_says() -> None:
    assert _body("llamacpp") == {"repeat_penalty": 1.0, "grammar": 'root ::= "x"'}
    assert _body("llamacpp", extra_body={"repeat_penalty": 1.3})["repeat_penalty"] == 1.3
    assert "repeat_penalty" not in _body("vllm")
    assert "repeat_penalty" not in _body("openai")
