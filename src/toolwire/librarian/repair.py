"""The protocol-independent heart of a turn: call the model, parse, repair (bounded).

Every step is a plain function of its inputs. Prefect wraps them at the edge
(`toolwire.flows.job_flows`); the engine itself never imports Prefect, so it can be
tested and benchmarked without a server.

Transient provider faults (timeouts, 5xx) are *not* handled here: they are
retried by whoever supplies ``call`` (Prefect task retries). Repairs are
protocol-level and live here, because they need a different prompt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from toolwire.domain import Attempt, Completion, CompletionRequest, Message
from toolwire.errors import ProtocolError

__all__ = ["TurnOutcome", "echo_for_repair", "format_errors_for_repair", "run_turn_with_repair"]

T = TypeVar("T")

# Seed 002: "On parse failure, server MUST run at most two repair retries."
MAX_REPAIRS_CEILING = 2


@dataclass(frozen=True, slots=True)
class TurnOutcome(Generic[T]):
    """What one turn produced: a parsed value, or the last protocol error."""

    value: T | None
    error: ProtocolError | None
    attempts: tuple[Attempt, ...]

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def repairs(self) -> int:
        return max(0, len(self.attempts) - 1)


def format_errors_for_repair(error: ProtocolError) -> str:
    """Errors as the repair prompt shows them: code and position, every message line, codes."""
    where = f" (line {error.line}, column {error.column})" if error.line else ""
    lines = [f"{error.code}{where}"]
    lines += [f"- {line}" for line in error.message.splitlines() if line.strip()]
    if error.details:
        lines.append("codes: " + ", ".join(error.details))
    return "\n".join(lines)


# A repair prompt shows the model its own reply. Past this many characters the echo only
# costs tokens and memory (a 50 MB reply would travel back on every repair), so the
# middle is cut; the attempt itself keeps the whole raw text.
MAX_REPAIR_ECHO_CHARS = 16_000


def echo_for_repair(original: str, limit: int = MAX_REPAIR_ECHO_CHARS) -> str:
    """``original`` for a repair prompt: whole if short, else its two ends around a marker."""
    if len(original) <= limit:
        return original
    half = limit // 2
    cut = len(original) - 2 * half
    marker = f"[... {cut} characters cut: the reply was far too long ...]"
    return f"{original[:half]}\n{marker}\n{original[-half:]}"


def run_turn_with_repair(
    *,
    turn: int,
    request_id: str,
    first_messages: list[Message],
    call: Callable[[CompletionRequest], Completion],
    make_request: Callable[[list[Message]], CompletionRequest],
    parse: Callable[[Completion], T],
    repair_messages: Callable[[ProtocolError, str], list[Message]],  # (error, echoed reply)
    max_repairs: int,
    on_attempt: Callable[[Attempt], None],
) -> TurnOutcome[T]:
    """One turn: the first call plus at most ``max_repairs`` repair calls.

    ``parse`` raises ``ProtocolError`` on text that breaks the protocol.
    ``on_attempt`` is called with every attempt *as soon as it exists* (before
    the next call), so the raw text is stored even if the process dies later.
    Provider errors propagate unchanged; attempts made before them are kept.
    ``repair_messages`` gets the reply as ``echo_for_repair`` cuts it (the attempt
    keeps the whole text).
    """
    max_repairs = max(0, min(max_repairs, MAX_REPAIRS_CEILING))
    messages = first_messages
    attempts: list[Attempt] = []
    last_error: ProtocolError | None = None
    for number in range(max_repairs + 1):
        started = time.time()
        completion = call(make_request(messages))
        try:
            value = parse(completion)
        except ProtocolError as exc:
            last_error = exc
            value = None
        attempt = Attempt(
            turn=turn,
            attempt=number,
            kind="initial" if number == 0 else "repair",
            request_id=request_id,
            prompt=messages,
            raw_text=completion.text,
            parse_ok=value is not None,
            error_code=None if value is not None else last_error.code if last_error else None,
            error_codes=()
            if value is not None
            else tuple(last_error.details if last_error else ()),
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            latency_ms=completion.latency_ms,
            finish_reason=completion.finish_reason,
            started_at=started,
        )
        attempts.append(attempt)
        on_attempt(attempt)
        if value is not None:
            return TurnOutcome(value=value, error=None, attempts=tuple(attempts))
        assert last_error is not None
        # Seed 002: the retry prompt holds only the validation errors and the original response.
        messages = repair_messages(last_error, echo_for_repair(completion.text))
    return TurnOutcome(value=None, error=last_error, attempts=tuple(attempts))
