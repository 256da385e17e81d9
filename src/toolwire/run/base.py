"""What a run is before its job adds its own: the spec resolved once, and the fields
every job's context holds.

A run reads and validates its spec once (:func:`resolve_spec`); the CLI's job check, the
transport choice and the job's context loader all take that one :class:`ResolvedSpec`.
:class:`RunBase` is what both jobs' contexts (``librarian.context.RunContext``,
``agent.context.AgentContext``) share: what the run row is written from, its provider and
its store with the run's one hold on the file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from toolwire.promptpack.pack import PromptPack
from toolwire.providers.base import Provider
from toolwire.spec.model import LoadedSpec, ModelConfig, load_spec
from toolwire.spec.settings import Settings, resolve_model_and_transport
from toolwire.store import Store

__all__ = ["ResolvedSpec", "RunBase", "resolve_loaded", "resolve_spec"]


@dataclass(frozen=True, slots=True)
class ResolvedSpec:
    """A run's spec as read once, and the model and transport it runs with (flags over
    settings over the spec)."""

    loaded: LoadedSpec
    model_cfg: ModelConfig
    transport: str


def resolve_loaded(
    loaded: LoadedSpec, settings: Settings, model: str | None = None, transport: str | None = None
) -> ResolvedSpec:
    """``loaded`` with its model and transport resolved (no file read)."""
    model_cfg, transport_name = resolve_model_and_transport(loaded.spec, settings, model, transport)
    return ResolvedSpec(loaded, model_cfg, transport_name)


def resolve_spec(
    spec: str | Path | ResolvedSpec,
    settings: Settings,
    model: str | None = None,
    transport: str | None = None,
) -> ResolvedSpec:
    """Read and validate the spec file, then resolve its model and transport; a spec
    already resolved is returned as it is (the one read of a run)."""
    if isinstance(spec, ResolvedSpec):
        return spec
    return resolve_loaded(load_spec(spec), settings, model, transport)


@dataclass(kw_only=True)
class RunBase:
    """The fields every job's run context holds; ``store`` and ``provider`` are None in a
    context that only renders (no run row), and set by ``run.start.open_run``."""

    run_id: str
    loaded: LoadedSpec
    pack: PromptPack
    model_cfg: ModelConfig  # after overrides
    transport: str
    workspace_root: Path
    store: Store | None = None
    provider: Provider | None = None
    user_id: str = "default"
    flow_run_id: str | None = None
    report_dir: Path | None = None
    started_at: float = field(default_factory=time.time)
    # The run's hold on the store file (Store.begin_session); None while let go.
    store_session: object | None = None

    @property
    def opened_store(self) -> Store:
        """The run's store; a render context has none."""
        if self.store is None:
            raise RuntimeError("this run context has no store: prepare the run first")
        return self.store

    @property
    def opened_provider(self) -> Provider:
        """The run's provider; a render context has none."""
        if self.provider is None:
            raise RuntimeError("this run context has no provider: prepare the run first")
        return self.provider
