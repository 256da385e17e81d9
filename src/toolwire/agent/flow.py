"""Prefect edge for tool agents: ``run_agent``'s steps as tasks of one ``agent`` flow.

Mirrors ``toolwire.flows.librarian_flow``: the composition stays in
``toolwire.agent.loop.run_agent``; here each step becomes a task and each
model call goes through the shared ``model-call`` task, whose retries handle
transient provider faults. Protocol repairs stay in the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolwire.flows import configure_prefect_env, run_job_in_flow

configure_prefect_env()

from prefect import flow  # noqa: E402  (environment first, then Prefect)

__all__ = ["agent_flow", "run_agent_flow"]

# The CLI's progress callback: a callable cannot be a flow parameter (parameters
# travel to the Prefect API as JSON), so the in-process caller sets this hook.
progress_hook: Callable[[int, int], None] | None = None


@flow(name="agent", log_prints=False, persist_result=False)
def agent_flow(
    spec_path: str,
    workspace: str | None = None,
    db: str | None = None,
    model: str | None = None,
    transport: str | None = None,
    record: str | None = None,
    user: str | None = None,
) -> Any:
    """Run a tool agent once; returns the AgentResult and publishes its report as an artifact."""
    from prefect.runtime import flow_run

    from toolwire.agent import prepare_agent_run, run_agent

    ctx = prepare_agent_run(
        spec_path,
        workspace=workspace,
        db=db,
        model=model,
        transport=transport,
        record=record,
        user=user,
        flow_run_id=str(flow_run.id) if flow_run.id else None,
    )
    return run_job_in_flow(
        ctx,
        run_agent,
        on_turn=progress_hook,
        artifact_key="agent",
        description=f"toolwire agent run ({ctx.transport})",
    )


def run_agent_flow(
    spec_path: str | Path, on_turn: Callable[[int, int], None] | None = None, **kwargs: Any
) -> Any:
    """Call the flow in process (the CLI's default path); returns the AgentResult."""
    global progress_hook
    progress_hook = on_turn
    try:
        return agent_flow(str(spec_path), **kwargs)
    finally:
        progress_hook = None
