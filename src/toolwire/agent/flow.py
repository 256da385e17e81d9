"""The tool agent's Prefect flow: ``toolwire.flows.agent_flow`` (one flow body for every job).

Kept as the agent's own entry point for deployments and callers that import it here.
"""

from __future__ import annotations

from pathlib import Path

from toolwire.flows import agent_flow, run_flow
from toolwire.jobs import JOBS, JobResult, OnTurn, RunOptions

__all__ = ["agent_flow", "run_agent_flow"]


def run_agent_flow(
    spec_path: str | Path, on_turn: OnTurn | None = None, **kwargs: str | None
) -> JobResult:
    """Call the agent flow in process; returns the AgentResult (Failed runs included)."""
    options = RunOptions(str(spec_path), **kwargs)  # type: ignore[arg-type]
    return run_flow(JOBS["agent"], options, on_turn)
