"""One model completion, read exactly as the engine reads it (the loop and ``toolwire parse``).

The stop reason is normalised first (``max_tokens`` is ``length``, ``SAFETY``
is ``content_filter``, ...). Output the provider withheld is never parsed:
the turn fails with ``OUTPUT_FILTERED`` and the history keeps a placeholder in
its place. Anything else goes to the transport adapter, whose failures come
back inside the ``TurnParse``: the model's text never crashes a run.
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.agent.transports.base import TransportAdapter, TurnParse, protocol_error
from toolwire.domain import Completion
from toolwire.errors import ProtocolError
from toolwire.stop_reasons import (
    CONTENT_FILTER,
    WITHHELD_TEXT,
    filtered_error,
    normalize_finish_reason,
)

__all__ = ["AGENT_PARSER_ERROR", "read_completion", "safe_parse"]

AGENT_PARSER_ERROR = "AGENT_PARSER_ERROR"


def safe_parse(adapter: TransportAdapter, completion: Completion) -> TurnParse:
    # Adapters report problems inside TurnParse; anything else escaping one is a bug,
    # but the model's text must never crash a run: it becomes a reported error.
    try:
        return adapter.parse(completion)
    except ProtocolError as exc:
        return TurnParse(error=exc)
    except Exception as exc:
        return TurnParse(
            error=protocol_error(
                AGENT_PARSER_ERROR,
                "Your answer could not be read. Follow the protocol exactly.",
                [f"{type(exc).__name__}: {exc}"[:200]],
            )
        )


def read_completion(
    adapter: TransportAdapter, completion: Completion
) -> tuple[Completion, TurnParse]:
    """The completion as the history should keep it, and what the turn holds."""
    reason = normalize_finish_reason(completion.finish_reason)
    if reason == CONTENT_FILTER:
        withheld = replace(completion, text=WITHHELD_TEXT, tool_calls=(), finish_reason=reason)
        return withheld, TurnParse(error=filtered_error(completion.finish_reason))
    completion = replace(completion, finish_reason=reason)
    return completion, safe_parse(adapter, completion)
