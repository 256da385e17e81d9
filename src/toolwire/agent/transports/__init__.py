"""One adapter per agent transport, found through a small registry dict.

Factories import their adapter (and its protocol module) only when a run uses it.
"""

from __future__ import annotations

from collections.abc import Callable

from toolwire.agent.transports.base import AgentSetup, TransportAdapter
from toolwire.agent.transports.execute import ExecuteAdapter
from toolwire.agent.transports.native import NativeAdapter
from toolwire.agent.transports.slots import SlotsAdapter
from toolwire.agent.transports.xct import XctAdapter
from toolwire.errors import UsageError

__all__ = ["ADAPTERS", "make_adapter"]


def _native(setup: AgentSetup) -> TransportAdapter:
    return NativeAdapter(setup)


def _slots(setup: AgentSetup) -> TransportAdapter:
    return SlotsAdapter(setup)


def _execute(setup: AgentSetup) -> TransportAdapter:
    return ExecuteAdapter(setup)


def _xct(setup: AgentSetup) -> TransportAdapter:
    return XctAdapter(setup)


ADAPTERS: dict[str, Callable[[AgentSetup], TransportAdapter]] = {
    "native": _native,
    "xml": _slots,
    "xml-final": _slots,
    "execute": _execute,
    "xct": _xct,
}


def make_adapter(setup: AgentSetup) -> TransportAdapter:
    """The adapter for ``setup.transport``; UsageError for a transport without one."""
    factory = ADAPTERS.get(setup.transport)
    if factory is None:
        known = ", ".join(ADAPTERS)
        raise UsageError(f"no agent adapter for transport {setup.transport!r}; known: {known}")
    return factory(setup)
