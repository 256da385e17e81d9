"""llama-cpp-python's server is sampled as the in-process model is (issue 32).

repeat_penalty 1.0 (its default, 1.1, penalises the tokens the prompt just
showed: words a task asks the model to copy), unless a spec's ``extra_body``
says otherwise; other servers get nothing added. And grammar literals go as
the model's own tokens (``providers.server_tokens``): with plain literals the
model wrote "Hello, World!" for a task asking for "hello world".
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx2
import pytest

from toolwire.domain import CompletionRequest
from toolwire.providers.openai_compat import OpenAIProvider

pytestmark = pytest.mark.unit

OK = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}
    ],
}
ASK = CompletionRequest(messages=[{"role": "user", "content": "hi"}], grammar='root ::= "x"')


def _body(server: str, **kwargs: Any) -> dict[str, Any]:
    provider = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", server=server, **kwargs)
    return dict(provider.request_params(ASK).get("extra_body") or {})


def test_llamacpp_server_gets_no_repeat_penalty_unless_the_spec_says() -> None:
    assert _body("llamacpp") == {"repeat_penalty": 1.0, "grammar": 'root ::= "x"'}
    assert _body("llamacpp", extra_body={"repeat_penalty": 1.3})["repeat_penalty"] == 1.3
    assert "repeat_penalty" not in _body("vllm")
    assert "repeat_penalty" not in _body("openai")


def _served(tokenize: Any) -> tuple[OpenAIProvider, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/extras/tokenize":
            return tokenize(json.loads(request.content)["input"])
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=OK)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    provider = OpenAIProvider(
        "m", base_url="http://127.0.0.1:9/v1", server="llamacpp", http_client=client,
        token_literals=True,
    )  # fmt: skip
    return provider, bodies


def test_grammar_literals_go_as_the_served_models_tokens() -> None:
    """As in process (gbnf.tokenize_literals): the server's own ids, its BOS left off."""
    fake = {"": [1], "x": [1, 87], "ab": [1, 40, 41]}
    provider, bodies = _served(lambda text: httpx2.Response(200, json={"tokens": fake[text]}))
    provider.complete(replace(ASK, grammar='root ::= "x" | "ab"'))
    provider.complete(replace(ASK, grammar='root ::= "x" | "ab"'))  # cached: no new asks
    assert [b["grammar"] for b in bodies] == ["root ::= <[87]> | (<[40]> <[41]>)"] * 2


def test_a_server_that_cannot_tokenize_gets_the_plain_grammar() -> None:
    provider, bodies = _served(lambda text: httpx2.Response(404, json={"detail": "Not Found"}))
    provider.complete(ASK)
    provider.complete(ASK)
    assert [b["grammar"] for b in bodies] == ['root ::= "x"'] * 2
