"""The provider interface: who we call to turn messages into a completion."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toolwire.domain import Completion, CompletionRequest


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. ``complete`` raises ``ProviderError`` subclasses on faults."""

    name: str  # "provider:model" as written in the spec, e.g. "llamacpp:smollm2-135m"
    supports_grammar: bool  # True when CompletionRequest.grammar is honoured
    # True when CompletionRequest.json_schema is honoured (read with getattr, default
    # False, so a provider written before it still works).
    supports_json_schema: bool

    def complete(self, request: CompletionRequest) -> Completion: ...

    def close(self) -> None: ...


def refusal(provider: object, request: CompletionRequest) -> str | None:
    """Why ``provider`` will not answer ``request`` well, before asking (None: ask it).

    Optional for providers: one that defines ``refusal(request)`` can turn down a
    request it cannot serve (a replay script without lines for it, a model too small
    for free-form JSON), so an optional step is skipped instead of failing or taking
    what was meant for the job. Wrappers forward it to the provider they wrap.
    """
    method = getattr(provider, "refusal", None)
    return method(request) if callable(method) else None
