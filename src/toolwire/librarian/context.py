"""A librarian run's context and result, and the steps that open a run: resolve the spec
(``load_context``), open the store and provider and write the run row (``prepare_run``,
through ``run.start``), then read the notes (``load_workspace``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from toolwire.domain import Attempt, OperationOutcome
from toolwire.errors import UsageError
from toolwire.librarian.journal.write_ahead import pending_recovery, recover
from toolwire.librarian.judge.scorer import NoteJudgement
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.summary import DeferredNote, FieldChange
from toolwire.promptpack.pack import load_pack
from toolwire.run.base import ResolvedSpec, RunBase, resolve_spec
from toolwire.run.start import open_run, record_run_start, resolve_workspace
from toolwire.spec.model import Constraints, Taxonomy
from toolwire.spec.settings import Settings, load_settings
from toolwire.store.evidence import CachingEmbedder, NoteRecord, RunCosts

__all__ = [
    "RunContext",
    "RunResult",
    "load_context",
    "prepare_run",
    "load_workspace",
]


@dataclass(kw_only=True)
class RunContext(RunBase):
    """Everything a librarian run needs, resolved once: spec, pack, model, store, workspace."""

    dry_run: bool = False
    commit: bool = False
    commit_verify: bool = True  # the repository's hooks and signing (--commit-no-verify)
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
    all_changes: bool = False  # --all: constraints.max_changes does not apply
    evidence: dict[str, NoteRecord] = field(default_factory=dict)
    previous: dict[str, NoteRecord] = field(default_factory=dict)
    decision_inputs: str = ""  # DecisionLedger.inputs_fingerprint of this run
    # Paths the user asked to be left as they are (undo, "leave it", a change taken
    # back by hand): no operation of this run touches them, reorganize's neither.
    left_alone: set[str] = field(default_factory=set)
    costs: RunCosts = field(default_factory=RunCosts)
    embedder: CachingEmbedder | None = None
    keep_raw_runs: int = 50  # settings.keep_raw_runs: raw texts kept for the last N ok runs
    keep_embeddings_days: int = 30  # settings.keep_embeddings_days: 0 keeps them forever

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
    plan: list[str] = field(default_factory=list)  # summary.plan_lines: the run on one screen
    traceback: str | None = None  # an internal error's, kept in the report (toolwire show)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def load_context(
    spec: str | Path | ResolvedSpec,
    *,
    workspace: str | Path | None = None,
    model: str | None = None,
    transport: str | None = None,
    settings: Settings | None = None,
) -> RunContext:
    """Spec, pack, model and workspace resolved; no store, no provider (used by `render`).
    ``spec``: a spec file, or the run's spec already resolved (then not read again)."""
    settings = settings or load_settings()
    resolved = resolve_spec(spec, settings, model, transport)
    loaded, model_cfg, transport_name = resolved.loaded, resolved.model_cfg, resolved.transport
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
        workspace_root=resolve_workspace(
            workspace, loaded.spec, loaded.base_dir, what="the notes folder"
        ),
        user_id=settings.user,
    )


def prepare_run(
    spec: str | Path | ResolvedSpec,
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
        spec, workspace=workspace, model=model, transport=transport, settings=settings
    )
    if not ctx.workspace_root.is_dir():
        raise UsageError(f"workspace {ctx.workspace_root} is not a directory")
    # The store file is held from here to the end of the run (run_librarian releases it).
    open_run(ctx, settings=settings, db=db, record=record, user=user, flow_run_id=flow_run_id)
    ctx.dry_run = dry_run
    ctx.commit = commit
    ctx.full = full
    ctx.keep_raw_runs = settings.keep_raw_runs
    ctx.keep_embeddings_days = settings.keep_embeddings_days
    record_run_start(ctx, job="librarian", dry_run=ctx.dry_run, settings={})
    return ctx


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
