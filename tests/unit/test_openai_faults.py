"""The openai provider offline: fault mapping, request shape per server, response mapping.

Faults are built by hand from the ``openai`` exception classes (openai 3.x
builds them on ``httpx2`` requests/responses, so those are used here) and also
produced by the real client over an in-memory ``httpx2.MockTransport``: the
whole client path runs, no socket is opened.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest
from pydantic import SecretStr

from toolwire.domain import CompletionRequest
from toolwire.errors import (
    LLM_PROVIDER_ERROR,
    LLM_PROVIDER_TIMEOUT,
    LLM_PROVIDER_TRANSIENT,
    LLM_PROVIDER_UNREACHABLE,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
    UsageError,
)
from toolwire.providers.faults import map_openai_error, safe_url
from toolwire.providers.openai_compat import NO_KEY, OpenAIProvider
from toolwire.providers.response import LLM_PROVIDER_INVALID_RESPONSE
from toolwire.spec.model import ModelConfig
from toolwire.spec.settings import Settings

pytestmark = pytest.mark.unit

BASE_URL = "http://127.0.0.1:8765/v1"
KEY = "sk-test-0123456789abcdef"
GBNF = 'root ::= "yes" | "no"'
URL = f"{BASE_URL}/chat/completions"


def _request() -> httpx2.Request:
    return httpx2.Request("POST", URL, headers={"Authorization": f"Bearer {KEY}"})


def _response(status: int, body: object) -> httpx2.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx2.Response(status, content=content.encode(), request=_request())


def _status(cls: type[openai.APIStatusError], status: int, body: object) -> Exception:
    # As the client does: the message is "Error code: N", the body is the decoded
    # JSON (with OpenAI's {"error": {...}} envelope already unwrapped) or the text.
    return cls(f"Error code: {status}", response=_response(status, body), body=body)


def _with_cause(exc: Exception, cause: Exception) -> Exception:
    exc.__cause__ = cause
    return exc


def _connection(cause_text: str) -> Exception:
    req = _request()
    return _with_cause(openai.APIConnectionError(request=req), httpx2.ConnectError(cause_text))


# (case id, the client's exception, expected type, code, transient, status_code, message part)
FAULTS: list[tuple[str, Callable[[], Exception], type, str, bool, int | None, str]] = [
    (
        "timeout",
        lambda: openai.APITimeoutError(request=_request()),
        ProviderTimeout,
        LLM_PROVIDER_TIMEOUT,
        True,
        None,
        BASE_URL,
    ),
    (
        "connection-refused",
        lambda: _connection("[Errno 111] Connection refused"),
        ProviderUnreachable,
        LLM_PROVIDER_UNREACHABLE,
        False,
        None,
        "Connection refused",
    ),
    (
        "dns",
        lambda: _connection("[Errno -2] Name or service not known"),
        ProviderUnreachable,
        LLM_PROVIDER_UNREACHABLE,
        False,
        None,
        "Name or service not known",
    ),
    (
        "429",
        lambda: _status(openai.RateLimitError, 429, {"message": "Rate limit reached"}),
        ProviderError,
        LLM_PROVIDER_TRANSIENT,
        True,
        429,
        "Rate limit reached",
    ),
    (
        "500",
        lambda: _status(openai.InternalServerError, 500, {"message": "boom"}),
        ProviderError,
        LLM_PROVIDER_TRANSIENT,
        True,
        500,
        "boom",
    ),
    (
        "503-text-body",
        lambda: _status(openai.InternalServerError, 503, "upstream overloaded"),
        ProviderError,
        LLM_PROVIDER_TRANSIENT,
        True,
        503,
        "upstream overloaded",
    ),
    (
        "504-plain-status-error",
        lambda: _status(openai.APIStatusError, 504, None),
        ProviderError,
        LLM_PROVIDER_TRANSIENT,
        True,
        504,
        "Error code: 504",
    ),
    (
        "400-context-length",
        lambda: _status(
            openai.BadRequestError,
            400,
            {
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
        ),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        400,
        "maximum context length is 4096 tokens",
    ),
    (
        "401",
        lambda: _status(openai.AuthenticationError, 401, {"message": "Invalid API key"}),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        401,
        "Invalid API key",
    ),
    (
        "404-fastapi-detail",
        lambda: _status(openai.NotFoundError, 404, {"detail": "Not Found"}),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        404,
        "Not Found",
    ),
    (
        "422-validation-list",
        lambda: _status(
            openai.UnprocessableEntityError,
            422,
            {"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]},
        ),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        422,
        "Field required",
    ),
    (
        "418-plain-status-error",
        lambda: _status(openai.APIStatusError, 418, "I'm a teapot"),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        418,
        "I'm a teapot",
    ),
    (
        "200-not-a-completion",
        lambda: openai.APIResponseValidationError(_response(200, "<html>"), "<html>"),
        ProviderError,
        LLM_PROVIDER_ERROR,
        False,
        200,
        "not a chat completion",
    ),
]


@pytest.mark.parametrize(
    ("make", "kind", "code", "transient", "status", "part"),
    [pytest.param(*case[1:], id=case[0]) for case in FAULTS],
)
def test_openai_fault_maps_to_typed_provider_error(
    make: Callable[[], Exception],
    kind: type,
    code: str,
    transient: bool,
    status: int | None,
    part: str,
) -> None:
    error = map_openai_error(make(), base_url=BASE_URL, secrets=[KEY])
    assert type(error) is kind
    assert error.code == code
    assert error.transient is transient
    assert error.status_code == status
    assert part in error.message
    assert KEY not in str(error)


def test_unreachable_message_names_the_endpoint() -> None:
    error = map_openai_error(_connection("[Errno 111] Connection refused"), base_url=BASE_URL)
    assert BASE_URL in error.message
    assert "TOOLWIRE_OPENAI_BASE_URL" in error.message


def test_server_message_that_echoes_the_key_is_redacted() -> None:
    exc = _status(openai.AuthenticationError, 401, {"message": f"Incorrect API key: {KEY}"})
    error = map_openai_error(exc, base_url=BASE_URL, secrets=[KEY])
    assert KEY not in str(error) and KEY not in repr(error.args)
    assert "Incorrect API key: ***" in error.message


def test_long_server_message_is_clipped() -> None:
    exc = _status(openai.BadRequestError, 400, {"message": "x" * 5000})
    error = map_openai_error(exc, base_url=BASE_URL)
    assert len(error.message) < 700 and error.message.endswith("...")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:sk-secret@host:8080/v1?key=sk-2", "http://host:8080/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
    ],
)
def test_safe_url_drops_userinfo_and_query(url: str, expected: str) -> None:
    assert safe_url(url) == expected


# --- The real client over an in-memory transport ----------------------------------------

Handler = Callable[[httpx2.Request], httpx2.Response]


def _ok(content: str | None = "yes", **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop" if not message else "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


class Recorder:
    """A MockTransport handler that keeps every request body and answers from a function."""

    def __init__(self, answer: Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.answer(request)

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)


def _provider(handler: Handler, **kwargs: Any) -> OpenAIProvider:
    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return OpenAIProvider("smollm2", base_url=BASE_URL, http_client=client, **kwargs)


def _json(body: dict[str, Any], status: int = 200) -> Handler:
    return lambda request: httpx2.Response(status, json=body)


def _ask(grammar: str | None = GBNF, tools: list[dict[str, Any]] | None = None):
    return CompletionRequest(
        messages=[{"role": "user", "content": "Is the sky blue?"}],
        temperature=0.0,
        max_tokens=7,
        grammar=grammar,
        tools=tools,
    )


# server -> (supports_grammar, token-limit field, the grammar as found in the body)
SERVER_SHAPES = [
    ("llamacpp", True, "max_tokens", {"grammar": GBNF}),
    ("vllm", True, "max_tokens", {"structured_outputs": {"grammar": GBNF}}),
    ("ollama", False, "max_tokens", {}),
    ("openai", False, "max_completion_tokens", {}),
]


@pytest.mark.parametrize(("server", "supports", "limit", "grammar_fields"), SERVER_SHAPES)
def test_grammar_travels_in_the_field_the_server_reads(
    server: str, supports: bool, limit: str, grammar_fields: dict[str, Any]
) -> None:
    recorder = Recorder(_json(_ok()))
    provider = _provider(recorder, server=server)
    provider.complete(_ask())
    body = recorder.body
    assert provider.supports_grammar is supports
    assert body[limit] == 7
    other = ({"max_tokens", "max_completion_tokens"} - {limit}).pop()
    assert other not in body
    for key, value in grammar_fields.items():
        assert body[key] == value
    if not supports:
        assert "grammar" not in body and "structured_outputs" not in body
        assert GBNF not in recorder.requests[-1].content.decode()


def test_extra_body_is_merged_under_the_grammar() -> None:
    recorder = Recorder(_json(_ok()))
    extra = {"top_k": 5, "structured_outputs": {"backend": "xgrammar", "grammar": "old"}}
    _provider(recorder, server="vllm", extra_body=extra, seed=7).complete(_ask())
    body = recorder.body
    assert body["top_k"] == 5 and body["seed"] == 7
    assert body["structured_outputs"] == {"backend": "xgrammar", "grammar": GBNF}


def test_missing_key_sends_placeholder_and_given_key_is_bearer() -> None:
    recorder = Recorder(_json(_ok()))
    _provider(recorder).complete(_ask(grammar=None))
    assert recorder.requests[-1].headers["authorization"] == f"Bearer {NO_KEY}"
    _provider(recorder, api_key=KEY).complete(_ask(grammar=None))
    assert recorder.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_plain_completion_maps_text_usage_finish_reason_and_model() -> None:
    completion = _provider(_json(_ok("no"))).complete(_ask())
    assert completion.text == "no"
    assert (completion.input_tokens, completion.output_tokens) == (12, 3)
    assert completion.finish_reason == "stop"
    assert completion.model == "served-model"
    assert completion.tool_calls == ()
    assert completion.latency_ms >= 0.0


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_native_tools_are_sent_and_tool_calls_read_back() -> None:
    answer = _ok(
        None,
        tool_calls=[
            _call("call_a", "read_file", '{"path": "notes/a.md"}'),
            _call("call_b", "read_file", '{"path": "notes/b.md"'),  # truncated JSON
            _call("call_c", "list_dir", ""),
            _call("call_d", "read_file", '["not", "an", "object"]'),
        ],
    )
    recorder = Recorder(_json(answer))
    completion = _provider(recorder).complete(_ask(grammar=None, tools=TOOLS))
    assert recorder.body["tools"] == TOOLS
    assert completion.text == "" and completion.finish_reason == "tool_calls"
    got = [(c.id, c.tool, c.args, c.source) for c in completion.tool_calls]
    assert got == [
        ("call_a", "read_file", {"path": "notes/a.md"}, "native"),
        ("call_b", "read_file", {"__raw__": '{"path": "notes/b.md"'}, "native"),
        ("call_c", "list_dir", {}, "native"),
        ("call_d", "read_file", {"__raw__": '["not", "an", "object"]'}, "native"),
    ]


def test_no_tools_key_when_request_has_none() -> None:
    recorder = Recorder(_json(_ok()))
    _provider(recorder).complete(_ask(grammar=None))
    assert "tools" not in recorder.body


def test_answer_without_choices_is_a_terminal_provider_error() -> None:
    answer = _ok()
    answer["choices"] = []
    with pytest.raises(ProviderError) as info:
        _provider(_json(answer)).complete(_ask())
    assert info.value.code == LLM_PROVIDER_INVALID_RESPONSE and info.value.transient is False
    assert "no choices" in info.value.message


def _raise(exc_type: type[Exception], text: str) -> Handler:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise exc_type(text, request=request)

    return handler


# (case id, transport behaviour, expected type, code, status)
WIRE_FAULTS: list[tuple[str, Handler, type, str, int | None]] = [
    ("refused", _raise(httpx2.ConnectError, "[Errno 111] Connection refused"),
     ProviderUnreachable, LLM_PROVIDER_UNREACHABLE, None),
    ("read-timeout", _raise(httpx2.ReadTimeout, "timed out"),
     ProviderTimeout, LLM_PROVIDER_TIMEOUT, None),
    ("connect-timeout", _raise(httpx2.ConnectTimeout, "timed out"),
     ProviderTimeout, LLM_PROVIDER_TIMEOUT, None),
    ("429", _json({"error": {"message": "slow down"}}, 429),
     ProviderError, LLM_PROVIDER_TRANSIENT, 429),
    ("502", lambda request: httpx2.Response(502, text="Bad Gateway"),
     ProviderError, LLM_PROVIDER_TRANSIENT, 502),
    ("400", _json({"error": {"message": "bad grammar", "type": "invalid_request_error"}}, 400),
     ProviderError, LLM_PROVIDER_ERROR, 400),
    ("404", _json({"detail": "Not Found"}, 404),
     ProviderError, LLM_PROVIDER_ERROR, 404),
]  # fmt: skip


@pytest.mark.parametrize(
    ("handler", "kind", "code", "status"),
    [pytest.param(*case[1:], id=case[0]) for case in WIRE_FAULTS],
)
def test_wire_fault_through_the_client_is_typed_and_carries_no_request(
    handler: Handler, kind: type, code: str, status: int | None
) -> None:
    with pytest.raises(ProviderError) as info:
        _provider(handler, api_key=KEY).complete(_ask())
    error = info.value
    assert type(error) is kind
    assert (error.code, error.status_code) == (code, status)
    # Raised `from None`: the client's exception (and its Authorization header) is not chained.
    assert error.__cause__ is None and error.__suppress_context__ is True
    assert KEY not in str(error)


# --- from_config: settings, defaults, keys -----------------------------------------------


def _settings(**values: Any) -> Settings:
    # Explicit values only: the developer's own environment must not leak into the test.
    fields = {"openai_api_key": None, "openai_base_url": None} | values
    return Settings.model_construct(**fields)


def _cfg(**values: Any) -> ModelConfig:
    return ModelConfig(**({"name": "openai:smollm2"} | values))


@pytest.mark.parametrize(
    ("cfg", "settings", "base_url"),
    [
        ({"server": "llamacpp"}, {}, "http://localhost:8000/v1"),
        ({"server": "vllm"}, {}, "http://localhost:8000/v1"),
        ({"server": "ollama"}, {}, "http://localhost:11434/v1"),
        ({"server": "openai"}, {"openai_api_key": SecretStr(KEY)}, "https://api.openai.com/v1"),
        ({"server": "ollama"}, {"openai_base_url": "http://gpu:11434/v1"}, "http://gpu:11434/v1"),
        (
            {"server": "llamacpp", "base_url": "http://spec:9000/v1"},
            {"openai_base_url": "http://env:9000/v1"},
            "http://spec:9000/v1",
        ),
    ],
)
def test_from_config_resolves_base_url(
    cfg: dict[str, Any], settings: dict[str, Any], base_url: str
) -> None:
    provider = OpenAIProvider.from_config(_cfg(**cfg), settings=_settings(**settings))
    assert provider.base_url == base_url
    assert provider.name == "openai:smollm2" and provider.model == "smollm2"
    provider.close()


def test_from_config_reads_key_from_settings_only() -> None:
    recorder = Recorder(_json(_ok()))
    client = httpx2.Client(transport=httpx2.MockTransport(recorder))
    provider = OpenAIProvider.from_config(
        _cfg(server="llamacpp", timeout_s=3.5, extra_body={"top_k": 1}),
        # The key is bound to the base URL configured with it (issue #16 item 7).
        settings=_settings(openai_api_key=SecretStr(KEY), openai_base_url=BASE_URL),
        http_client=client,
    )
    provider.complete(_ask())
    assert recorder.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert recorder.body["top_k"] == 1 and recorder.body["grammar"] == GBNF
    assert provider.timeout_s == 3.5
    assert KEY not in repr(provider)


def test_official_openai_without_key_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        OpenAIProvider.from_config(_cfg(server="openai"), settings=_settings())


def test_unknown_server_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="model.server"):
        OpenAIProvider("m", base_url=BASE_URL, server="tgi")
