"""One retry policy for model calls, whoever runs the job.

Transient provider faults (timeouts, 429/5xx: ``ToolwireError.transient``) are
retried: 3 attempts in all, backing off 1 s then 4 s. Terminal faults (a 4xx,
an exhausted replay, a server that is not there) fail at once. Inside a Prefect
flow or task run the model call becomes a retrying Prefect task (the flows hand
``toolwire.flows.model_call``'s wrapper to ``run_job``), so Prefect shows each try;
outside Prefect :class:`RetryingProvider` applies the same policy with
``time.sleep``. Either way each retry logs the same line on the
``toolwire.providers`` logger.

:func:`with_retries` is the wrapper every run gets unless its caller hands another
(``toolwire.lifecycle.run_job(wrap=...)``), so `run`, `--no-prefect`, batch and served
runs retry alike. Protocol *repairs* are a different thing and stay in the engine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import ToolwireError, is_transient
from toolwire.providers.base import Provider

__all__ = [
    "MODEL_CALL_POLICY",
    "RetryPolicy",
    "RetryingProvider",
    "log_retry",
    "with_retries",
]

log = logging.getLogger("toolwire.providers")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` calls at most; ``delays[i]`` seconds before retry ``i + 1``."""

    attempts: int
    delays: tuple[float, ...]

    @property
    def retries(self) -> int:
        return self.attempts - 1

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        return self.delays[min(retry, len(self.delays)) - 1] if self.delays else 0.0


# STACK.md: Prefect's retries=2 is 3 attempts; the same numbers outside Prefect.
MODEL_CALL_POLICY = RetryPolicy(attempts=3, delays=(1.0, 4.0))


def log_retry(exc: BaseException, attempt: int, policy: RetryPolicy) -> bool:
    """Log a failed model call; True if the policy retries it (``attempt`` is 1-based)."""
    if not is_transient(exc) or attempt >= policy.attempts:
        return False
    code = exc.code if isinstance(exc, ToolwireError) else type(exc).__name__
    log.warning(
        "model call failed (%s), attempt %d of %d; retrying in %.0f s",
        code,
        attempt,
        policy.attempts,
        policy.delay(attempt),
    )
    return True


class RetryingProvider:
    """``inner`` with transient faults retried in plain Python (no Prefect)."""

    def __init__(
        self,
        inner: Provider,
        policy: RetryPolicy = MODEL_CALL_POLICY,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.name = inner.name
        self.supports_grammar = inner.supports_grammar
        self.supports_json_schema = bool(getattr(inner, "supports_json_schema", False))
        # A replay knows whether the recorded run's tools travelled natively (replay.py).
        self.carries_native_tools = getattr(inner, "carries_native_tools", None)
        self._sleep = sleep

    def complete(self, request: CompletionRequest) -> Completion:
        attempt = 1
        while True:
            try:
                return self.inner.complete(request)
            except ToolwireError as exc:
                if not log_retry(exc, attempt, self.policy):
                    raise
            self._sleep(self.policy.delay(attempt))
            attempt += 1

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> object:
        # Token counters and tests read the inner provider's extras (tokenizer, path);
        # via __dict__, so a half-built copy (unpickling) raises instead of recursing.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def with_retries(provider: Provider, policy: RetryPolicy = MODEL_CALL_POLICY) -> Provider:
    """``provider`` behind the retry policy, retried in process. An already wrapped
    provider is returned as it is: two wrappers would multiply the attempts."""
    if isinstance(provider, RetryingProvider):
        return provider
    return RetryingProvider(provider, policy)
