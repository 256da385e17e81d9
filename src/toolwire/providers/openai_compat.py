"""The ``openai:MODEL`` provider: any OpenAI-compatible chat endpoint via the official client.

One class serves OpenAI, Ollama, vLLM and llama.cpp's server; ``model.server``
says which one is on the other end, and that decides three things: whether
a GBNF grammar can travel (and under which request field), how the JSON
Schema of a reply travels (``providers.structured``: every server takes one),
and which token-limit field to send. Retries are off in the client (``max_retries=0``):
transient faults are retried, bounded and with backoff, by the Prefect
model-call task (``toolwire.flows.job_flows``), so a retry is visible there, not hidden here.

Three guards against a hostile or broken endpoint (issue #16): the API key
goes only to the base URL it was configured for (``providers.keys``); a call
has a *total* deadline of ``model.timeout_s`` (the client's timeout is per
read, so a server sending a byte every few seconds never timed out); and the
raw body is checked by ``providers.response`` before anything reads it.

This module imports ``openai`` (~0.3 s): only the provider registry
(``toolwire.providers``) imports it, when a spec names an ``openai:`` model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import openai

from toolwire.domain import Completion, CompletionRequest, ToolCall
from toolwire.errors import LLM_PROVIDER_ERROR, ProviderError, ProviderTimeout, UsageError
from toolwire.providers.faults import map_openai_error, safe_url
from toolwire.providers.keys import OFFICIAL_BASE_URL, key_for, redact_key_echoes, same_origin
from toolwire.providers.response import completion_from_body, tool_call_from
from toolwire.providers.server_tokens import ServerTokens
from toolwire.providers.structured import response_format, strict_tools
from toolwire.spec.settings import load_settings

__all__ = [
    "OpenAIProvider",
    "SERVERS",
    "DEFAULT_BASE_URLS",
    "NO_KEY",
    "grammar_body",
    "merge_body",
    "parse_tool_calls",
    "completion_from_response",
]

SERVERS: tuple[str, ...] = ("openai", "llamacpp", "vllm", "ollama")

# Where each server listens out of the box (used when neither the spec nor
# TOOLWIRE_OPENAI_BASE_URL names a base_url).
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "llamacpp": "http://localhost:8000/v1",  # python -m llama_cpp.server
    "vllm": "http://localhost:8000/v1",  # vllm serve
    "ollama": "http://localhost:11434/v1",
}

# llama.cpp, Ollama and vLLM ignore the key unless started with one, but the
# client refuses to run without a value: send an obvious placeholder.
NO_KEY = "sk-no-key"

# How a GBNF grammar travels, per server. llama-cpp-python's server takes a
# top-level `grammar`. vLLM >= 0.12 takes `structured_outputs: {grammar}` (its
# xgrammar backend reads GBNF); `guided_grammar` was removed in 0.12.0, so older
# vLLM needs `extra_body: {guided_grammar: ...}` by hand. Ollama's and OpenAI's
# chat endpoints take no grammar: absent here, so `supports_grammar` is False.
_GRAMMAR_FIELDS: dict[str, Callable[[str], dict[str, Any]]] = {
    "llamacpp": lambda gbnf: {"grammar": gbnf},
    "vllm": lambda gbnf: {"structured_outputs": {"grammar": gbnf}},
}


# Sampling fields a server gets unless the spec's extra_body says otherwise.
# llama-cpp-python's server defaults to repeat_penalty 1.1, which penalises the
# tokens the prompt just showed: a path or a word the model must copy from its
# task. The in-process worker sends 1.0 for the same reason (llama_worker.generate).
_SAMPLING_DEFAULTS: dict[str, dict[str, Any]] = {"llamacpp": {"repeat_penalty": 1.0}}


def grammar_body(server: str, grammar: str | None) -> dict[str, Any]:
    """The extra request fields that carry ``grammar`` to ``server`` ({} when it can't)."""
    field = _GRAMMAR_FIELDS.get(server)
    return field(grammar) if field is not None and grammar else {}


def merge_body(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive merge of two request bodies; ``override`` wins on conflicts.

    Nested so that a spec's ``extra_body: {structured_outputs: {backend: ...}}``
    and the grammar's ``structured_outputs: {grammar: ...}`` both survive.
    """
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_body(current, value)
        else:
            merged[key] = value
    return merged


_log = logging.getLogger(__name__)


def parse_tool_calls(tool_calls: Any) -> tuple[ToolCall, ...]:
    """``message.tool_calls`` (client objects or dicts) as ToolCalls (``source="native"``)."""
    calls = (tool_call_from(call, index) for index, call in enumerate(tool_calls or ()))
    return tuple(call for call in calls if call is not None)


def completion_from_response(response: Any, *, latency_ms: float, model: str) -> Completion:
    """A Completion from an ``openai`` ChatCompletion; servers that answer 200 without
    a choice get a terminal ProviderError."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise ProviderError(
            "the server answered without any choice", code=LLM_PROVIDER_ERROR, transient=False
        )
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ProviderError(
            "the server answered a choice without a message",
            code=LLM_PROVIDER_ERROR,
            transient=False,
        )
    usage = getattr(response, "usage", None)
    return Completion(
        text=getattr(message, "content", None) or "",
        finish_reason=getattr(choice, "finish_reason", None) or "unknown",
        tool_calls=parse_tool_calls(getattr(message, "tool_calls", None)),
        input_tokens=getattr(usage, "prompt_tokens", None),
        output_tokens=getattr(usage, "completion_tokens", None),
        latency_ms=latency_ms,
        model=getattr(response, "model", None) or model,
    )


class OpenAIProvider:
    """Chat completions over HTTP; faults come out as toolwire ProviderErrors."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        server: str = "openai",
        timeout_s: float = 120.0,
        extra_body: Mapping[str, Any] | None = None,
        seed: int | None = None,
        name: str | None = None,
        http_client: Any = None,
        key_note: str | None = None,
        token_literals: bool = False,
    ) -> None:
        if server not in SERVERS:
            raise UsageError(f"model.server {server!r}: expected one of {', '.join(SERVERS)}")
        self.model = model
        self.name = name or f"openai:{model}"
        self.server = server
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.seed = seed
        self.supports_grammar = server in _GRAMMAR_FIELDS
        self.supports_json_schema = True  # each in its own shape (providers.structured)
        # Only for redacting error messages; never logged, never in repr.
        self._secrets = (api_key,) if api_key else ()
        self._key_note = key_note  # why a configured key was withheld, for a 401's message
        self._client_errors: type[Exception] = openai.OpenAIError
        self._http_client = http_client
        self._make_client = lambda: openai.OpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout_s,
            max_retries=0,
            http_client=http_client,
        )
        self._client: Any = self._make_client()
        # llama-cpp-python's server: grammar literals as the model's tokens (server_tokens).
        self._tokens = (
            ServerTokens(base_url, timeout_s=timeout_s, http_client=http_client)
            if token_literals and server == "llamacpp"
            else None
        )

    @classmethod
    def from_config(
        cls, cfg: Any, *, settings: Any = None, http_client: Any = None
    ) -> OpenAIProvider:
        """Build from a spec's ``model`` mapping; the key and a fallback base_url come from
        the environment (``Settings``), never from the spec."""
        settings = settings if settings is not None else load_settings()
        server = getattr(cfg, "server", "openai") or "openai"
        base_url = (
            getattr(cfg, "base_url", None)
            or settings.openai_base_url
            or DEFAULT_BASE_URLS.get(server, DEFAULT_BASE_URLS["openai"])
        )
        # The key goes only where it was configured to go (providers.keys): a spec's
        # base_url is untrusted and never receives it.
        api_key, key_note = key_for(base_url, settings)
        if key_note:
            _log.warning("%s: %s", safe_url(base_url), key_note)
        if not api_key and same_origin(base_url, OFFICIAL_BASE_URL):
            raise UsageError(
                "openai: needs an API key for api.openai.com: set TOOLWIRE_OPENAI_API_KEY "
                "or OPENAI_API_KEY in the environment (never in the spec)"
            )
        _, _, model = cfg.name.partition(":")
        return cls(
            model,
            base_url=base_url,
            api_key=api_key,
            server=server,
            timeout_s=float(getattr(cfg, "timeout_s", 120.0)),
            extra_body=getattr(cfg, "extra_body", None) or {},
            seed=getattr(cfg, "seed", None),
            name=cfg.name,
            http_client=http_client,
            key_note=key_note,
            # llama-cpp-python's server tokenizes at /extras/tokenize (server_tokens).
            token_literals=server == "llamacpp",
        )

    def request_params(self, request: CompletionRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
        }
        # OpenAI deprecated max_tokens (its reasoning models reject it); the
        # local servers read only max_tokens (llama.cpp's default is 16 tokens).
        limit = "max_completion_tokens" if self.server == "openai" else "max_tokens"
        params[limit] = request.max_tokens
        if self.seed is not None:
            params["seed"] = self.seed
        if request.tools:
            # Strict function parameters are OpenAI's; the others constrain no tool call.
            strict = request.strict_tools and self.server == "openai"
            params["tools"] = strict_tools(request.tools) if strict else request.tools
            # vLLM refuses "auto" unless started with --enable-auto-tool-choice; the other
            # local servers ignore it: only OpenAI's API gets the field.
            if request.tool_choice and self.server == "openai":
                params["tool_choice"] = request.tool_choice
        if request.json_schema is not None and not request.grammar:
            params["response_format"] = response_format(self.server, request.json_schema)
        defaults = merge_body(_SAMPLING_DEFAULTS.get(self.server, {}), self.extra_body)
        grammar = request.grammar
        if grammar and self._tokens is not None:
            grammar = self._tokens.grammar(grammar)
        body = merge_body(defaults, grammar_body(self.server, grammar))
        if body:
            params["extra_body"] = body
        return params

    def complete(self, request: CompletionRequest) -> Completion:
        """One chat completion within ``timeout_s`` in all; faults are ProviderErrors."""
        params = self.request_params(request)
        started = time.perf_counter()
        outcome = self._call_with_deadline(params)
        if isinstance(outcome, BaseException):
            if isinstance(outcome, ProviderError):
                raise self._redacted(outcome)
            if not isinstance(outcome, self._client_errors):
                raise outcome  # a bug of ours: never hide it as a provider fault
            error = map_openai_error(outcome, base_url=self.base_url, secrets=self._secrets)
            if self._key_note and error.status_code in (401, 403):
                error.message = f"{error.message} ({self._key_note})"
                error.args = (error.message,)
            # `from None`: the client's exception holds the request and its
            # Authorization header; it must not ride along.
            raise error from None
        status, body = outcome
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            completion = completion_from_body(
                body, status=status, where=safe_url(self.base_url), latency_ms=latency_ms,
                model=self.model,
            )  # fmt: skip
        except ProviderError as exc:  # quotes the body: a 200 whose error echoes the key
            raise self._redacted(exc) from None
        return self._without_key(completion)

    def _without_key(self, completion: Completion) -> Completion:
        """A server that echoes the key inside its answer (issue 45 item 19) would put it
        in the store, the report and a ``--record`` cassette: its text and tool calls
        are redacted like an error's message."""
        if not self._secrets:
            return completion
        text = redact_key_echoes(completion.text, self._secrets)
        calls = tuple(replace(c, args=self._redact_value(c.args)) for c in completion.tool_calls)
        if text == completion.text and calls == completion.tool_calls:
            return completion
        return replace(completion, text=text, tool_calls=calls)

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return redact_key_echoes(value, self._secrets)
        if isinstance(value, dict):
            return {self._redact_value(k): self._redact_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redact_value(v) for v in value]
        return value

    def _redacted(self, error: ProviderError) -> ProviderError:
        """``error`` with every echo of the key out of its message (providers.keys)."""
        error.message = redact_key_echoes(error.message, self._secrets)
        error.args = (error.message,)
        return error

    def _call_with_deadline(self, params: dict[str, Any]) -> tuple[int, bytes] | BaseException:
        """(status, raw body) of one request, or the exception it raised; a ProviderTimeout
        once ``timeout_s`` has passed in all.

        The request runs on a daemon thread: the client's timeout applies per read,
        so a server dribbling a byte at a time would hold it forever. At the
        deadline the client is closed (dropping the connection, which ends the
        thread's read) and replaced for the next call.
        """
        box: list[tuple[int, bytes] | BaseException] = []

        def call() -> None:
            try:
                raw = self._client.chat.completions.with_raw_response.create(**params)
                box.append((int(raw.status_code), bytes(raw.content)))
            except BaseException as exc:  # handed to the caller's thread
                box.append(exc)

        worker = threading.Thread(target=call, name="toolwire-model-call", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if box:
            return box[0]
        stuck = self._client
        self._client = self._make_client() if self._http_client is None else stuck
        try:
            stuck.close()
        except Exception:  # noqa: BLE001 - closing a client mid-read may complain
            pass
        return ProviderTimeout(
            f"no complete answer from {safe_url(self.base_url)} within {self.timeout_s:g}s "
            "(model.timeout_s is the deadline of the whole call)"
        )

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(name={self.name!r}, server={self.server!r}, "
            f"base_url={safe_url(self.base_url)!r})"
        )
