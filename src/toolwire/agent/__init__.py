"""Tool agents: a spec's tools driven over native, xml, xml-final, execute or xct.

``prepare_agent_run`` resolves and records a run; ``run_agent`` drives it to a
final report (or a Failed status). ``toolwire.agent.flow`` wraps the same
steps as Prefect tasks. Importing this package loads neither Prefect nor a model.
"""

from __future__ import annotations

from toolwire.agent.context import (
    AGENT_TRANSPORTS,
    AgentContext,
    load_agent_context,
    prepare_agent_run,
)
from toolwire.agent.loop import AGENT_MAX_ITERATIONS, AgentResult, run_agent

__all__ = [
    "AGENT_MAX_ITERATIONS",
    "AGENT_TRANSPORTS",
    "AgentContext",
    "AgentResult",
    "load_agent_context",
    "prepare_agent_run",
    "run_agent",
]
