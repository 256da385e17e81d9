"""Why a model stopped, in one vocabulary whatever the provider said.

Providers name the same three facts differently: OpenAI ``length``, Anthropic
``max_tokens``, Gemini ``MAX_TOKENS``; OpenAI ``content_filter``, Gemini
``SAFETY``/``RECITATION``, Anthropic ``refusal``. The parsers judge a reply by
the normalised reason: ``length`` means the text was cut by the output limit
(an unclosed final report may be kept, marked truncated); ``content_filter``
means the provider withheld (part of) the output, so nothing in it may run.
"""

from __future__ import annotations

from toolwire.errors import ProtocolError

__all__ = [
    "CONTENT_FILTER",
    "LENGTH",
    "OUTPUT_FILTERED",
    "STOP",
    "TOOL_CALLS",
    "WITHHELD_TEXT",
    "filtered_error",
    "normalize_finish_reason",
]

STOP = "stop"
LENGTH = "length"
CONTENT_FILTER = "content_filter"
TOOL_CALLS = "tool_calls"
OUTPUT_FILTERED = "OUTPUT_FILTERED"  # error code: the provider withheld the output
# What the history keeps in place of withheld output (a chat history needs a message).
WITHHELD_TEXT = "(output withheld by the provider's content filter)"

_ALIASES = {
    # normal end of the answer
    "stop": STOP,
    "end_turn": STOP,  # Anthropic
    "stop_sequence": STOP,  # Anthropic
    "eos": STOP,  # llama.cpp, vLLM
    "eos_token": STOP,
    "finish_reason_unspecified": STOP,  # Gemini's unset value
    # cut by the output limit
    "length": LENGTH,
    "max_tokens": LENGTH,  # Anthropic, Gemini (MAX_TOKENS)
    "max_output_tokens": LENGTH,  # OpenAI Responses API (incomplete_details.reason)
    "model_length": LENGTH,  # vLLM when the context window is full
    "model_context_window_exceeded": LENGTH,  # Anthropic
    # output withheld or replaced by the provider
    "content_filter": CONTENT_FILTER,  # OpenAI, Azure
    "safety": CONTENT_FILTER,  # Gemini
    "recitation": CONTENT_FILTER,  # Gemini
    "blocklist": CONTENT_FILTER,  # Gemini
    "prohibited_content": CONTENT_FILTER,  # Gemini
    "spii": CONTENT_FILTER,  # Gemini
    "image_safety": CONTENT_FILTER,  # Gemini
    "refusal": CONTENT_FILTER,  # Anthropic streaming classifiers
    # the model called tools
    "tool_calls": TOOL_CALLS,
    "function_call": TOOL_CALLS,  # OpenAI legacy
    "tool_use": TOOL_CALLS,  # Anthropic
}


def normalize_finish_reason(value: str | None) -> str:
    """``stop``, ``length``, ``content_filter`` or ``tool_calls`` for every name a provider
    uses; an unknown reason comes back lower-cased and is judged as a normal stop."""
    if not value:
        return STOP
    key = value.strip().lower().replace("-", "_")
    return _ALIASES.get(key, key)


def filtered_error(finish_reason: str) -> ProtocolError:
    """The turn's error when the provider withheld the output: nothing in it runs."""
    return ProtocolError(
        OUTPUT_FILTERED,
        f"The provider withheld your output (finish_reason={finish_reason}): nothing in it was "
        "read or run. Answer again, rephrasing what was filtered.",
        details=[f"FINISH_REASON:{finish_reason}"],
    )
