"""Prefect edge for model calls: each ``complete`` is one retrying ``model-call`` task.

The shape of ``providers.recording``: a provider wrapping a provider. Inside a
flow or task run (the CLI's flow, a batch worker, a served deployment) every
model call becomes a task run, so Prefect shows each call and each retry of a
transient fault, with the policy of ``providers.retrying``. The flows hand
:func:`with_prefect_retries` to ``run_job`` as its ``wrap``: the core never looks
for Prefect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TaskRunContext

from toolwire.domain import Completion, CompletionRequest
from toolwire.providers.base import Provider
from toolwire.providers.retrying import (
    MODEL_CALL_POLICY,
    RetryingProvider,
    RetryPolicy,
    log_retry,
    with_retries,
)

if TYPE_CHECKING:
    from prefect.client.schemas.objects import TaskRun
    from prefect.states import State
    from prefect.tasks import Task

__all__ = ["PrefectProvider", "model_call", "with_prefect_retries"]


def _retry_if_transient(task: Task[..., Completion], task_run: TaskRun, state: State) -> bool:
    """Prefect's retry condition: transient faults only, logged like plain retries."""
    exc = state.result(raise_on_failure=False)
    attempt = int(task_run.run_count or 1)
    return isinstance(exc, BaseException) and log_retry(exc, attempt, MODEL_CALL_POLICY)


@task(
    name="model-call",
    retries=MODEL_CALL_POLICY.retries,
    retry_delay_seconds=list(MODEL_CALL_POLICY.delays),
    retry_condition_fn=_retry_if_transient,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def model_call(provider: Provider, request: CompletionRequest) -> Completion:
    """One model call as a task; its retries are the model-call policy's."""
    return provider.complete(request)


class PrefectProvider:
    """``inner`` whose every call is a ``model-call`` task run (with retries)."""

    def __init__(self, inner: Provider, policy: RetryPolicy = MODEL_CALL_POLICY) -> None:
        self.inner = inner
        self.name = inner.name
        self.supports_grammar = inner.supports_grammar
        self.supports_json_schema = bool(getattr(inner, "supports_json_schema", False))
        # A replay knows whether the recorded run's tools travelled natively (replay.py).
        self.carries_native_tools = getattr(inner, "carries_native_tools", None)
        self._call = (
            model_call
            if policy == MODEL_CALL_POLICY
            else model_call.with_options(
                retries=policy.retries, retry_delay_seconds=list(policy.delays)
            )
        )

    def complete(self, request: CompletionRequest) -> Completion:
        return self._call(self.inner, request)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> object:
        inner = self.__dict__.get("inner")  # never recurse on a half-built copy
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def with_prefect_retries(provider: Provider, policy: RetryPolicy = MODEL_CALL_POLICY) -> Provider:
    """``provider`` behind the retry policy: a ``model-call`` task per call inside a
    Prefect flow or task run, plain retries outside one (a batch item called directly).
    An already wrapped provider is returned as it is: two wrappers would multiply the
    attempts."""
    if isinstance(provider, PrefectProvider | RetryingProvider):
        return provider
    if FlowRunContext.get() is None and TaskRunContext.get() is None:
        return with_retries(provider, policy)
    return PrefectProvider(provider, policy)
