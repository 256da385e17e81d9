"""An agent run's context: spec, pack, tools, model and store, resolved once up front.

Its fields beyond :class:`~toolwire.run.base.RunBase` are the tools; :func:`load_agent_context`
resolves what needs no store or provider (``render``/``parse`` use it), and
:func:`prepare_agent_run` adds the provider and the store and records the
spec, the pack and a ``running`` run row (``job = 'agent'``) before the first
model call, so even a run that crashes at once is visible in SQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from toolwire.agent.pack import load_agent_pack, stage_for
from toolwire.agent.transports.prompt_tools import (
    PROMPT_TOOLS_TRANSPORTS,
    prompt_tools_note,
    warn_prompt_tools,
)
from toolwire.errors import UsageError
from toolwire.providers.structured import Constraint, constraint_for
from toolwire.run.base import ResolvedSpec, RunBase, resolve_spec
from toolwire.run.start import open_run, record_run_start, resolve_workspace
from toolwire.spec.model import Constraints, Spec
from toolwire.spec.settings import Settings, load_settings
from toolwire.tools import ToolRegistry, build_registry

__all__ = ["AGENT_TRANSPORTS", "AgentContext", "load_agent_context", "prepare_agent_run"]

AGENT_TRANSPORTS: tuple[str, ...] = ("native", "xml", "xml-final", "execute", "xct")


@dataclass(kw_only=True)
class AgentContext(RunBase):
    """Everything a tool-agent run needs; ``store``/``provider`` are None before prepare."""

    tools: ToolRegistry

    @property
    def spec(self) -> Spec:
        return self.loaded.spec

    @property
    def constraints(self) -> Constraints:
        return self.loaded.spec.constraints

    @property
    def constraint(self) -> Constraint | None:
        """``grammar``, ``json_schema`` or None: what the requests are constrained by."""
        return constraint_for(self.model_cfg.constrain, self.provider, self.model_cfg)

    @property
    def use_grammar(self) -> bool:
        return self.constraint == "grammar"

    @property
    def tools_in_prompt(self) -> bool:
        """native / xml-final for a model that takes no tool definitions (prompt_tools);
        a replay says what the recorded run did (``providers.replay``: ``sent``)."""
        carried = getattr(self.provider, "carries_native_tools", None)
        if carried is not None and self.transport in PROMPT_TOOLS_TRANSPORTS:
            return not carried
        return prompt_tools_note(self.transport, self.model_cfg) is not None


def _resolve_workspace(workspace: str | Path | None, spec: Spec, base_dir: Path) -> Path:
    root = resolve_workspace(workspace, spec, base_dir, what="the folder the agent's tools act in")
    if not root.is_dir():
        raise UsageError(f"workspace {root} is not a directory")
    return root


def load_agent_context(
    spec: str | Path | ResolvedSpec,
    *,
    workspace: str | Path | None = None,
    model: str | None = None,
    transport: str | None = None,
    settings: Settings | None = None,
) -> AgentContext:
    """Spec, pack, tools, model and transport resolved; no store, no provider.
    ``spec``: a spec file, or the run's spec already resolved (then not read again)."""
    settings = settings or load_settings()
    resolved = resolve_spec(spec, settings, model, transport)
    loaded, model_cfg, transport_name = resolved.loaded, resolved.model_cfg, resolved.transport
    if transport_name not in AGENT_TRANSPORTS:
        raise UsageError(
            f"transport {transport_name!r} is not a tool-agent transport "
            f"(one of {', '.join(AGENT_TRANSPORTS)}); xml_attrless specs run the librarian"
        )
    if not loaded.spec.tools:
        raise UsageError(
            f"spec {loaded.spec.name!r} declares no tools: a tool agent needs at least one"
        )
    pack = load_agent_pack(loaded.pack_dir)
    for stage in (stage_for(transport_name), "repair"):
        if stage not in pack.stages:
            raise UsageError(f"prompt pack {loaded.pack_dir} has no stage {stage!r}")
    root = _resolve_workspace(workspace, loaded.spec, loaded.base_dir)
    return AgentContext(
        run_id=uuid.uuid4().hex,
        loaded=loaded,
        pack=pack,
        model_cfg=model_cfg,
        transport=transport_name,
        workspace_root=root,
        tools=build_registry(loaded.spec.tools, workspace=root),
        user_id=settings.user,
    )


def prepare_agent_run(
    spec: str | Path | ResolvedSpec,
    *,
    workspace: str | Path | None = None,
    db: str | Path | None = None,
    model: str | None = None,
    transport: str | None = None,
    record: str | Path | None = None,
    user: str | None = None,
    flow_run_id: str | None = None,
    settings: Settings | None = None,
) -> AgentContext:
    """Load and check everything, open the provider and the store, record the run start."""
    settings = settings or load_settings()
    ctx = load_agent_context(
        spec, workspace=workspace, model=model, transport=transport, settings=settings
    )
    warn_prompt_tools(ctx.transport, ctx.model_cfg)  # said before the first call
    # The store file is held from here to the end of the run (run_agent releases it).
    open_run(ctx, settings=settings, db=db, record=record, user=user, flow_run_id=flow_run_id)
    _record_start(ctx)
    return ctx


def _record_start(ctx: AgentContext) -> None:
    record_run_start(
        ctx,
        job="agent",
        dry_run=False,
        settings={
            "grammar": ctx.use_grammar,
            "constraint": ctx.constraint,
            "tools_in_prompt": ctx.tools_in_prompt,
            # What the requests send as tool_choice (only OpenAI's API takes it).
            "tool_choice": _tool_choice(ctx),
            "max_iterations": ctx.constraints.max_iterations,
            "max_tool_calls_per_turn": ctx.constraints.max_tool_calls_per_turn,
        },
    )


def _tool_choice(ctx: AgentContext) -> str | None:
    native = ctx.transport in ("native", "xml-final") and not ctx.tools_in_prompt
    sent = native and ctx.model_cfg.name.startswith("openai:") and ctx.model_cfg.server == "openai"
    return "auto" if sent else None
