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

from toolwire.flows import configure_prefect_env, model_call

configure_prefect_env()

from prefect import flow, task  # noqa: E402  (environment first, then Prefect)
from prefect.cache_policies import NO_CACHE  # noqa: E402

__all__ = ["agent_flow", "run_agent_flow"]

# The CLI's progress callback: a callable cannot be a flow parameter (parameters
# travel to the Prefect API as JSON), so the in-process caller sets this hook.
progress_hook: Callable[[int, int], None] | None = None


def _task_step(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run one agent step as a Prefect task (no caching: inputs hold live handles)."""
    return task(name=name, cache_policy=NO_CACHE, persist_result=False)(fn)(*args)


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
    from prefect.artifacts import create_markdown_artifact
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
    try:
        result = run_agent(
            ctx,
            call=lambda request: model_call(ctx.provider, request),
            step=_task_step,
            on_turn=progress_hook,
        )
    finally:
        ctx.provider.close()
    if result.report_path is not None:
        create_markdown_artifact(
            markdown=result.report_path.read_text(encoding="utf-8"),
            key=f"agent-{result.run_id[:8]}",
            description=f"toolwire agent run {result.run_id} ({ctx.transport})",
        )
    return result


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
