"""Map faults of the ``openai`` client to toolwire's typed provider errors.

The mapping decides what Prefect retries (``transient``) and what a stored
run says (``code``): timeouts -> ``LLM_PROVIDER_TIMEOUT``; connection refused
or DNS -> ``LLM_PROVIDER_UNREACHABLE``; 429 and 5xx -> ``LLM_PROVIDER_TRANSIENT``;
any other status -> terminal ``LLM_PROVIDER_ERROR`` carrying the server's own
message and the status code.

Messages name the endpoint (without any userinfo) and the server's words, never
an API key: known secrets are redacted from every message as a second guard.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import openai

from toolwire.errors import (
    LLM_PROVIDER_ERROR,
    LLM_PROVIDER_TRANSIENT,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
)
from toolwire.providers.keys import redact_key_echoes

__all__ = ["map_openai_error", "safe_url", "server_message"]

# A server's error body can be a page of HTML or a long validation dump:
# keep enough to act on, not enough to flood a terminal or a DuckDB cell.
MAX_SERVER_MESSAGE = 500


def safe_url(url: str) -> str:
    """``url`` without user:password@ (a key can hide there) and without the query string."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_SERVER_MESSAGE:
        return text[: MAX_SERVER_MESSAGE - 3] + "..."
    return text


def server_message(body: object, fallback: str = "") -> str:
    """The human part of an error body: OpenAI's ``error.message``, FastAPI's ``detail``,
    or the raw text, clipped."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for key in ("message", "detail", "error"):
                value = inner.get(key)
                if isinstance(value, str) and value.strip():
                    return _clip(value)
                if value is not None and not isinstance(value, dict):
                    return _clip(json.dumps(value, default=str))
        elif isinstance(inner, str) and inner.strip():
            return _clip(inner)
        return _clip(json.dumps(body, default=str))
    if isinstance(body, str) and body.strip():
        return _clip(body)
    return _clip(fallback)


def _redact(message: str, secrets: Iterable[str]) -> str:
    """``message`` with every key, and every word echoing part of one, as ``***``
    (``providers.keys.redact_key_echoes``: masked, partial and URL-encoded echoes)."""
    return redact_key_echoes(message, secrets)


def _cause_text(exc: BaseException) -> str:
    # The client wraps httpx's error ("[Errno 111] Connection refused",
    # "Name or service not known"); that text is what tells the user why.
    cause = exc.__cause__ or exc.__context__
    text = str(cause).strip() if cause is not None else ""
    return f" ({_clip(text)})" if text else ""


def map_openai_error(
    exc: BaseException, *, base_url: str, secrets: Iterable[str] = ()
) -> ProviderError:
    """The toolwire error for a fault raised by the ``openai`` client.

    The caller raises the result ``from None``: the original exception holds
    the HTTP request, whose headers carry the API key, and a chained cause
    would travel into logs and Prefect's stored state with it.
    """
    where = safe_url(base_url)
    error: ProviderError
    # Order matters: APITimeoutError is a subclass of APIConnectionError.
    if isinstance(exc, openai.APITimeoutError):
        error = ProviderTimeout(f"no answer from {where} within the timeout (model.timeout_s)")
    elif isinstance(exc, openai.APIConnectionError):
        error = ProviderUnreachable(
            f"cannot reach {where}{_cause_text(exc)}; is the server running and the "
            "base_url right (model.base_url or TOOLWIRE_OPENAI_BASE_URL)?"
        )
    elif isinstance(exc, openai.APIStatusError):
        error = _status_error(exc.status_code, server_message(exc.body, exc.message), where)
    elif isinstance(exc, openai.APIResponseValidationError):
        error = ProviderError(
            f"{where} answered {exc.status_code} with a body that is not a chat completion",
            code=LLM_PROVIDER_ERROR,
            transient=False,
            status_code=exc.status_code,
        )
    else:
        error = ProviderError(
            f"request to {where} failed: {type(exc).__name__}: {_clip(str(exc))}",
            code=LLM_PROVIDER_ERROR,
            transient=False,
        )
    error.message = _redact(error.message, secrets)
    error.args = (error.message,)
    return error


redact = _redact  # for other writers of text that may hold a server's words


def _status_error(status: int, message: str, where: str) -> ProviderError:
    if status == 429 or status >= 500:
        # Overload and server faults may pass: the model-call task retries these, bounded.
        return ProviderError(
            f"{where} answered {status} (transient): {message}",
            code=LLM_PROVIDER_TRANSIENT,
            transient=True,
            status_code=status,
        )
    return ProviderError(
        f"{where} answered {status}: {message}",
        code=LLM_PROVIDER_ERROR,
        transient=False,
        status_code=status,
    )
