"""A librarian run's context and result, and the steps that open and close a run:
resolve the spec (``load_context``), open the store and provider and write the run row
(``prepare_run``), read the notes (``load_workspace``), and the run's hold on the store
file (``release_store``, ``store_free_while_waiting``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolwire.domain import Attempt, Completion, CompletionRequest, OperationOutcome
from toolwire.errors import ToolwireError, UsageError
from toolwire.librarian.journal import pending_recovery, recover
from toolwire.librarian.judge import NoteJudgement
from toolwire.librarian.summary import DeferredNote, FieldChange
from toolwire.librarian.workspace import Workspace
from toolwire.promptpack import PromptPack, load_pack
from toolwire.providers import make_provider
from toolwire.providers.base import Provider
from toolwire.providers.recording import RecordingProvider
from toolwire.runstart import record_run_start, resolve_workspace
from toolwire.settings import Settings, load_settings, resolve_model_and_transport
from toolwire.spec import Constraints, LoadedSpec, ModelConfig, Taxonomy, load_spec
from toolwire.store import Store
from toolwire.store.evidence import CachingEmbedder, NoteRecord, RunCosts

__all__ = [
    "RunContext",
    "RunResult",
    "load_context",
    "prepare_run",
    "load_workspace",
    "release_store",
    "store_free_while_waiting",
]


@dataclass
class RunContext:
    """Everything a run needs, resolved once: spec, pack, model, store, workspace."""

    run_id: str
    loaded: LoadedSpec
    pack: PromptPack
    model_cfg: ModelConfig  # after overrides
    transport: str
    workspace_root: Path
    # None only in a render context (load_context): prepare_run opens both.
    store: Store | None
    provider: Provider | None
    dry_run: bool = False
    commit: bool = False
    commit_verify: bool = True  # the repository's hooks and signing (--commit-no-verify)
    user_id: str = "default"
    flow_run_id: str | None = None
    report_dir: Path | None = None
    started_at: float = field(default_factory=time.time)
    # The run's hold on the store file (Store.begin_session), released when the run ends.
    store_session: object | None = None
    # (workspace, outcomes so far, the workspace as those outcomes leave it): validate_turn's
    # running view, so each turn sees earlier turns' plans without replaying them.
    planned: tuple[Workspace, int, Workspace] | None = None
    # The scorer's judgement of every note (judge.py), set by build_requests.
    judgements: dict[str, NoteJudgement] = field(default_factory=dict)
    # The notes as read (load_workspace), what was skipped or left (warnings), and what the
    # applied (or, dry, planned) changes do field by field (apply_outcomes).
    workspace: Workspace | None = None
    warnings: list[str] = field(default_factory=list)
    changed: list[FieldChange] = field(default_factory=list)
    # Incremental runs (store/evidence.py): --full recomputes everything; ``evidence``
    # is each note's decision record as this run leaves it, ``previous`` as the store had
    # it; ``costs`` what the run computed or reused (stored as its run_costs row).
    full: bool = False
    evidence: dict[str, NoteRecord] = field(default_factory=dict)
    previous: dict[str, NoteRecord] = field(default_factory=dict)
    costs: RunCosts = field(default_factory=RunCosts)
    embedder: CachingEmbedder | None = None
    keep_raw_runs: int = 50  # settings.keep_raw_runs: raw texts kept for the last N ok runs

    @property
    def opened_store(self) -> Store:
        """The run's store; a render context (``load_context``) has none."""
        if self.store is None:
            raise RuntimeError("this run context has no store: use prepare_run")
        return self.store

    @property
    def opened_provider(self) -> Provider:
        """The run's provider; a render context (``load_context``) has none."""
        if self.provider is None:
            raise RuntimeError("this run context has no provider: use prepare_run")
        return self.provider

    @property
    def taxonomy(self) -> Taxonomy:
        """The spec's taxonomy (a librarian spec must have one: spec validation)."""
        taxonomy = self.loaded.spec.taxonomy
        if taxonomy is None:
            raise UsageError(f"spec {self.loaded.spec.name!r} has no taxonomy")
        return taxonomy

    @property
    def constraints(self) -> Constraints:
        return self.loaded.spec.constraints


@dataclass
class RunResult:
    run_id: str
    status: str  # "ok" | "Failed"
    error_code: str | None
    error_message: str | None
    outcomes: list[OperationOutcome]
    attempts: list[Attempt]
    turns: int
    diff: str = ""
    report_path: Path | None = None
    commit_sha: str | None = None
    changes: list[FieldChange] = field(default_factory=list)
    deferred: list[DeferredNote] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def load_context(
    spec_path: str | Path,
    *,
    workspace: str | Path | None = None,
    model: str | None = None,
    transport: str | None = None,
    settings: Settings | None = None,
) -> RunContext:
    """Spec, pack, model and workspace resolved; no store, no provider (used by `render`)."""
    settings = settings or load_settings()
    loaded = load_spec(spec_path)
    spec = loaded.spec
    model_cfg, transport_name = resolve_model_and_transport(spec, settings, model, transport)
    if transport_name != "xml_attrless":
        raise UsageError(
            f"the librarian speaks xml_attrless; transport {transport_name!r} is for tool agents"
        )
    return RunContext(
        run_id=uuid.uuid4().hex,
        loaded=loaded,
        pack=load_pack(loaded.pack_dir),
        model_cfg=model_cfg,
        transport=transport_name,
        workspace_root=resolve_workspace(workspace, spec, loaded.base_dir, what="the notes folder"),
        store=None,
        provider=None,
        user_id=settings.user,
    )


def prepare_run(
    spec_path: str | Path,
    *,
    workspace: str | Path | None = None,
    db: str | Path | None = None,
    model: str | None = None,
    transport: str | None = None,
    dry_run: bool = False,
    commit: bool = False,
    record: str | Path | None = None,
    user: str | None = None,
    flow_run_id: str | None = None,
    settings: Settings | None = None,
    full: bool = False,
) -> RunContext:
    """Load and check everything up front, then record the spec, pack and a 'running' run row.

    ``full``: recompute every note's evidence and decision, ignoring what the store kept."""
    settings = settings or load_settings()
    ctx = load_context(
        spec_path, workspace=workspace, model=model, transport=transport, settings=settings
    )
    if not ctx.workspace_root.is_dir():
        raise UsageError(f"workspace {ctx.workspace_root} is not a directory")
    provider = make_provider(ctx.model_cfg, base_dir=ctx.loaded.base_dir)
    if record:
        provider = RecordingProvider(provider, Path(record))
    db_path = Path(db) if db else Path(settings.db)
    ctx.provider = provider
    ctx.store = Store(db_path, lock_timeout_s=settings.db_lock_timeout_s)
    ctx.dry_run = dry_run
    ctx.commit = commit
    ctx.user_id = user or settings.user
    ctx.flow_run_id = flow_run_id
    ctx.full = full
    ctx.keep_raw_runs = settings.keep_raw_runs
    ctx.report_dir = db_path.parent / "reports"
    # Hold the store file from here to the end of the run: a run's dozen writes then
    # share one open connection (each still commits at once). run_librarian releases it.
    ctx.store_session = ctx.opened_store.begin_session()
    try:
        record_run_start(ctx, job="librarian", dry_run=ctx.dry_run, settings={})
    except BaseException:
        release_store(ctx)
        raise
    return ctx


def store_free_while_waiting(
    ctx: RunContext, call: Callable[[CompletionRequest], Completion]
) -> Callable[[CompletionRequest], Completion]:
    """``call`` with the store file let go while the model thinks.

    A model call takes seconds to minutes; holding the file through it would make
    ``toolwire sql`` (or another run) wait for the whole run. A replay answers at
    once, so replayed runs keep their hold. If the hold cannot be taken back (another
    process has the file), each write waits for the file on its own, as outside a run.
    """
    if ctx.model_cfg.provider == "replay":
        return call

    def calling(request: CompletionRequest) -> Completion:
        release_store(ctx)
        try:
            return call(request)
        finally:
            try:
                ctx.store_session = ctx.opened_store.begin_session()
            except ToolwireError:  # StoreLocked / StoreError: the next write retries
                ctx.store_session = None

    return calling


def release_store(ctx: RunContext) -> None:
    """End the run's hold on the store file (idempotent); other processes may take it."""
    token, ctx.store_session = ctx.store_session, None
    if token is not None:
        ctx.opened_store.end_session(token)


def load_workspace(ctx: RunContext) -> Workspace:
    """Finish any apply a crash interrupted, then read the notes.

    A dry run writes nothing, recovery included: it only says what is pending."""
    if ctx.dry_run:
        pending = pending_recovery(ctx.workspace_root)
        ctx.warnings += [pending] if pending else []
    else:
        recover(ctx.workspace_root)
    workspace = Workspace.load(ctx.workspace_root, ctx.loaded.spec.notes)
    ctx.workspace = workspace
    ctx.warnings += workspace.warnings
    return workspace
