"""Bounds and checks of single spec values, shared with settings and the CLI.

Each bound refuses at load time what would otherwise fail deep in a run, after the
notes were read, or be read as another value without a word (safety round four):

* ``timeout_s`` at most a day: past ~1e9 s Python's lock waits raise OverflowError;
* ``seed`` 0 .. 2**32 - 2: llama.cpp reads a uint32 (a larger seed silently wraps) and
  takes 0xFFFFFFFF, which is what -1 becomes, as "a random seed";
* ``n_threads`` at most ggml's GGML_MAX_N_THREADS (512): a million crashed the worker;
* ``max_tokens`` at most a million: a server answers a 400 after the notes were read;
* ``max_tool_calls_per_turn`` at most 100 and ``max_iterations`` at most 1,000: the xml
  transport declares a slot per call of a turn in its prompt (a million ran the store out
  of memory) and ``parse --spec`` lists every slot of a run (their product);
* a ``base_url`` is an http(s) URL with a host (else LLM_PROVIDER_UNREACHABLE, late);
* a user id is one non-blank line (a blank one was stored by a run, then refused by
  ``profile show``);
* ``schedule.parameters`` values are the flow's types (else they fail when it fires);
* a label, description or glob said to be "one line" is one: no ``\r``, NEL, U+2028 or
  control character either.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from toolwire.domain import TRANSPORTS

__all__ = [
    "MAX_ANSWER_TOKENS",
    "MAX_ITERATIONS",
    "MAX_N_THREADS",
    "MAX_SEED",
    "MAX_TIMEOUT_S",
    "MAX_TOOL_CALLS_PER_TURN",
    "MAX_USER_ID_CHARS",
    "PROVIDERS",
    "base_url_problem",
    "is_one_line",
    "model_name_problem",
    "refusing",
    "schedule_parameter_problem",
    "user_id_problem",
]

PROVIDERS: tuple[str, ...] = ("llamacpp", "openai", "replay")
MAX_TIMEOUT_S = 86_400.0
MAX_ANSWER_TOKENS = 1_000_000
MAX_SEED = 2**32 - 2
MAX_N_THREADS = 512
MAX_ITERATIONS = 1_000
MAX_TOOL_CALLS_PER_TURN = 100
MAX_USER_ID_CHARS = 200


def refusing(problem: Callable[[Any], str | None]) -> Any:
    """A pydantic field validator from a ``*_problem`` check: the value as given, or
    ValueError with the check's sentence (None, an unset optional field, passes)."""

    def check(cls: type, value: Any) -> Any:
        why = None if value is None else problem(value)
        if why:
            raise ValueError(why)
        return value

    return classmethod(check)


# C0 and C1 control characters but the tab; line breaks are splitlines()'s to find.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def is_one_line(text: str) -> bool:
    """``text`` is one non-blank line without control characters. Not only ``\n``:
    YAML's ``"\r"``, ``"\x85"`` (NEL) and ``"\u2028"`` break a line too, and a label with
    one passed as "one line" into grammars, requests and front matter."""
    return bool(text.strip()) and text.splitlines() == [text] and not _CONTROL.search(text)


def model_name_problem(name: str) -> str | None:
    """Why ``name`` is not ``provider:target``, or None."""
    provider, sep, target = name.partition(":")
    if not sep or not target.strip():
        return f"expected 'provider:name' with provider one of {list(PROVIDERS)}"
    if provider not in PROVIDERS:
        return f"unknown provider {provider!r}; expected one of {list(PROVIDERS)}"
    return None


def user_id_problem(user: str) -> str | None:
    """Why ``user`` cannot be a user id (``--user``, ``TOOLWIRE_USER``,
    ``schedule.parameters.user``), or None."""
    if not user.strip():
        return "a user id is not empty or blank"
    if any(ord(c) < 32 or ord(c) == 127 for c in user):
        return "a user id is one line without control characters"
    if len(user) > MAX_USER_ID_CHARS:
        return f"a user id has at most {MAX_USER_ID_CHARS} characters, got {len(user)}"
    return None


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an OpenAI-compatible base URL, or None."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return f"a URL has no spaces or control characters, got {url!r}"
    try:
        parsed = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        return f"not a URL ({exc}): {url!r}"
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return f"expected an http:// or https:// URL with a host, got {url!r}"
    return None


def schedule_parameter_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the flow parameter ``key`` of a schedule, or None (unknown
    keys are preflight's to report)."""
    if key in ("dry_run", "commit"):
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if key in ("model", "transport", "user") and not isinstance(value, str):
        return f"expected a string, got {value!r}"
    if key == "model":
        return model_name_problem(value)
    if key == "transport" and value not in TRANSPORTS:
        return f"unknown transport {value!r}; expected one of {', '.join(TRANSPORTS)}"
    if key == "user":
        return user_id_problem(value)
    return None
