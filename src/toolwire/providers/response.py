"""The one validator of what an OpenAI-compatible server answers: bytes in, Completion out.

Why not the client's own parsing: the ``openai`` client builds its response
models without validating them, so a 200 whose body is HTML comes back as a
``str``, ``"content": 5`` as an int, and deeply nested JSON raises
``RecursionError`` from the decoder; each surfaced later as a traceback
while the run row stayed ``running`` (issue #16 item 12). Here the raw body
is decoded and checked field by field; anything that is not a chat completion
is a terminal :class:`~toolwire.errors.ProviderError` with code
``LLM_PROVIDER_INVALID_RESPONSE``, naming the field, so the run ends
``Failed`` with that code.

Only what toolwire reads is checked: ``choices[0].message.content`` (text or
null), ``tool_calls`` (function name and arguments), ``finish_reason``,
``usage`` (counts that are not non-negative integers are dropped, not fatal),
``model``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolwire.domain import Completion, ToolCall
from toolwire.errors import ProviderError

__all__ = [
    "LLM_PROVIDER_INVALID_RESPONSE",
    "MAX_RESPONSE_BYTES",
    "completion_from_body",
    "parse_arguments",
    "tool_call_from",
]

LLM_PROVIDER_INVALID_RESPONSE = "LLM_PROVIDER_INVALID_RESPONSE"
# A reply bigger than this is not a chat completion toolwire can use (the hostile
# tier sends 50 MB replies; they are read, refused with a code, never half-parsed).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class _Invalid(Exception):
    """One thing wrong with the body, in words for the error message."""


def _invalid(where: str, status: int, reason: str) -> ProviderError:
    return ProviderError(
        f"{where} answered {status} with a body that is not a chat completion: {reason}",
        code=LLM_PROVIDER_INVALID_RESPONSE,
        transient=False,
        status_code=status,
    )


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; unparseable or non-object arguments are kept
    verbatim under ``__raw__`` for the protocol layer to report to the model."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return {"__raw__": json.dumps(raw, default=str)}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the C stack
        return {"__raw__": raw}
    return value if isinstance(value, dict) else {"__raw__": raw}


def _field(item: Any, name: str) -> Any:
    """``item[name]`` for dicts, ``item.name`` for the client's objects."""
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def tool_call_from(call: Any, index: int) -> ToolCall | None:
    """One ``message.tool_calls`` entry (dict or client object) as a ToolCall; None for
    a non-function call (nothing toolwire can run)."""
    function = _field(call, "function")
    if function is None:
        return None
    name = _field(function, "name")
    call_id = _field(call, "id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
        tool=name if isinstance(name, str) else "",
        args=parse_arguments(_field(function, "arguments")),
        source="native",
    )


def _count(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text_or_none(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _Invalid(f"{what} is {type(value).__name__}, not text")


def _message(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(choice, message) of the first choice, or _Invalid."""
    if not isinstance(body, dict):
        raise _Invalid(f"the JSON is {type(body).__name__}, not an object")
    if "error" in body and "choices" not in body:
        raise _Invalid(f"an error object: {json.dumps(body['error'], default=str)[:300]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Invalid("no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _Invalid("choices[0] is not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Invalid("choices[0].message is missing or not an object")
    return choice, message


def _tool_calls(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    raw = message.get("tool_calls")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _Invalid("message.tool_calls is not a list")
    calls = []
    for index, call in enumerate(raw):
        if not isinstance(call, dict):
            raise _Invalid(f"message.tool_calls[{index}] is not an object")
        function = call.get("function")
        if function is not None and not isinstance(function, dict):
            raise _Invalid(f"message.tool_calls[{index}].function is not an object")
        parsed = tool_call_from(call, index)
        if parsed is not None:
            calls.append(parsed)
    return tuple(calls)


def completion_from_body(
    body: bytes, *, status: int, where: str, latency_ms: float, model: str
) -> Completion:
    """A Completion from a raw response body, or a ProviderError saying what is wrong."""
    if len(body) > MAX_RESPONSE_BYTES:
        raise _invalid(where, status, f"{len(body)} bytes, over {MAX_RESPONSE_BYTES}")
    try:
        decoded = json.loads(body)
    except RecursionError:
        raise _invalid(where, status, "JSON nested too deeply to read") from None
    except ValueError as exc:  # not JSON, truncated JSON, not UTF-8
        start = body[:60].decode("utf-8", "replace")
        raise _invalid(where, status, f"not JSON ({exc}); it starts {start!r}") from None
    try:
        choice, message = _message(decoded)
        text = _text_or_none(message.get("content"), "message.content")
        finish = _text_or_none(choice.get("finish_reason"), "finish_reason")
        calls = _tool_calls(message)
    except _Invalid as exc:
        raise _invalid(where, status, str(exc)) from None
    usage = decoded.get("usage")
    served = decoded.get("model")
    return Completion(
        text=text or "",
        finish_reason=finish or "unknown",
        tool_calls=calls,
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        latency_ms=latency_ms,
        model=served if isinstance(served, str) and served else model,
    )
