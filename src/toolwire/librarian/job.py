"""The librarian job as plain steps: prepare -> requests -> turns -> validate -> apply -> finish.

`run_librarian` composes the steps in plain Python; `toolwire.flows` composes
the same steps as Prefect tasks. Nothing here imports Prefect.

Failure policy: if any turn ends without a valid response after its repairs,
the run is ``Failed`` with that turn's error code and *nothing* is applied:
the workspace is never left with half a run in it. Every attempt is stored
the moment it exists, so a crash later in the run loses no raw text.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolwire.domain import (
    AnswerTemplate,
    Attempt,
    Completion,
    CompletionRequest,
    LibrarianResponse,
    Message,
    OperationOutcome,
)
from toolwire.engine import TurnOutcome, format_errors_for_repair, run_turn_with_repair
from toolwire.errors import (
    INTERNAL_ERROR,
    LIBRARIAN_PARSE_FAILED,
    ProtocolError,
    ProviderError,
    ToolwireError,
    UsageError,
)
from toolwire.interrupts import shielded
from toolwire.librarian import judge as _judge
from toolwire.librarian.answer import (
    PlannedOperation,
    conform,
    derive_title,
    plan_operations,
    render_template,
    template_gbnf,
)
from toolwire.librarian.batching import estimate_tokens, plan_batches
from toolwire.librarian.changes import render_changes
from toolwire.librarian.journal import apply_plan, diff_plan, git_commit, pending_recovery, recover
from toolwire.librarian.judge import (
    Embedder,
    NoteEvidence,
    NoteJudgement,
    TopicScorer,
    decide,
)
from toolwire.librarian.review import record_run_questions
from toolwire.librarian.summary import (
    DeferredNote,
    FieldChange,
    current_topic,
    deferred_notes,
    field_changes,
)
from toolwire.librarian.validate import planned_view, validate_operations
from toolwire.librarian.workspace import Workspace
from toolwire.memory import profile_block
from toolwire.phases import with_progress
from toolwire.promptpack import PromptPack, load_pack, render_stage
from toolwire.protocols.attrless import (
    LibrarianRequest,
    Source,
    librarian_grammar,
    parse_response,
    render_request,
)
from toolwire.providers import make_provider
from toolwire.providers.base import Provider
from toolwire.providers.recording import RecordingProvider
from toolwire.report import render_markdown_report
from toolwire.runstart import record_run_start, resolve_workspace
from toolwire.settings import Settings, load_settings, resolve_model_and_transport
from toolwire.spec import (
    Constraints,
    Judgement,
    LoadedSpec,
    ModelConfig,
    Taxonomy,
    load_spec,
)
from toolwire.store import Store
from toolwire.store.evidence import (
    CachingEmbedder,
    DecisionLedger,
    NoteRecord,
    RunCosts,
    decision_key,
    embedder_id,
    record_run_costs,
)

__all__ = [
    "RunContext",
    "TurnRequest",
    "RunResult",
    "prepare_run",
    "load_workspace",
    "build_requests",
    "run_turn",
    "validate_turn",
    "apply_outcomes",
    "finish_run",
    "run_librarian",
    "release_store",
]

# Answer + system prompt + envelope reserve when splitting notes into requests.
ENVELOPE_RESERVE_TOKENS = 200


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


@dataclass(frozen=True)
class TurnRequest:
    turn: int
    request_id: str
    request_xml: str
    messages: list[Message]
    grammar: str | None
    note_ids: tuple[str, ...]
    truncated_ids: frozenset[str]
    # The answer as planned (answer.py): the model fills only its slots.
    plan: tuple[PlannedOperation, ...] = ()
    template: AnswerTemplate | None = None


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


def _store_free_while_waiting(
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


def _request_constraints(constraints: Constraints) -> tuple[tuple[str, str], ...]:
    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return (
        ("strict_mode", text(constraints.strict_mode)),
        ("max_operations", text(constraints.max_operations)),
        ("allow_delete", text(constraints.allow_delete)),
        ("allowed_kinds", " ".join(constraints.allowed_kinds)),
        ("min_confidence", text(constraints.min_confidence)),
    )


def build_requests(ctx: RunContext, workspace: Workspace) -> list[TurnRequest]:
    """The run's requests: first, one request the system answers itself (every operation
    the scorer decided, no model call), then one request per batch of notes whose answer
    has slots for the model, each rendered exactly as it will be sent.

    With a judgement block the run is incremental (``store.evidence``): a note whose
    bytes, spec, embedder, model and examples are as at its last decision, and whose
    decision comes out the same, is not worked on again."""
    spec = ctx.loaded.spec
    propose = ctx.pack.stages["propose"]
    # Seed 004: the user's profile and past undos shape the request ("" when none). It is
    # data beside the request, never part of <goal>: a profile is text a model once wrote.
    user_ctx = profile_block(ctx.store, ctx.user_id) if ctx.store is not None else ""
    reserve = (
        ENVELOPE_RESERVE_TOKENS
        + estimate_tokens(propose.system_prompt + propose.user_prompt_template + user_ctx)
        + ctx.model_cfg.max_tokens
    )
    # Without a judgement block the model decides everything, as before (the envelope
    # under the plain librarian grammar); with one, the scorer plans the answer.
    judgement = spec.judgement
    model_notes = list(workspace.notes.values())
    requests: list[TurnRequest] = []
    derived: dict[str, str] | None = None
    if judgement is not None:
        token = _RUN_BEING_JUDGED.set(ctx)
        try:
            ctx.judgements = judge_notes(ctx, workspace)
        finally:
            _RUN_BEING_JUDGED.reset(token)
        work = _notes_to_work_on(ctx, workspace)
        waiting = _still_deferred(ctx)
        ctx.warnings += [waiting] if waiting else []
        # A 135M model refuses every title (NOTES.md), so a scorer-decided run takes the
        # title from the note itself: grounded by construction, and no model call.
        if judgement.decide == "scorer":
            derived = {n.note_id: derive_title(n.body) for n in work if not n.title}
        model_notes, system_plan = [], []
        for note in work:
            ops = _plan(ctx, [(note.note_id, note.title)], derived)
            if any(op.title is None or op.body_markdown is None for op in ops):
                model_notes.append(note)
            else:
                system_plan += ops
        if system_plan:
            requests.append(_system_request(ctx, system_plan))
    ctx.costs.notes_to_model = len(model_notes)
    # A title is never cut by the note budget: cap it here (a 6,000-word title once sent
    # 6,620 tokens against a 2,048-token window).
    notes = [(n.note_id, n.title[:MAX_TITLE_CHARS_SHOWN], n.body) for n in model_notes]
    batches = plan_batches(
        notes,
        batch_size=ctx.constraints.batch_size,
        context_window_tokens=ctx.constraints.context_window_tokens,
        reserved_tokens=reserve,
    )
    use_grammar = ctx.model_cfg.constrain == "grammar" and (
        ctx.provider is None or ctx.opened_provider.supports_grammar
    )
    titles = {n.note_id: n.title for n in model_notes}
    for batch in batches:
        turn = len(requests)
        request_id = f"req_{ctx.run_id[:8]}_{turn + 1:03d}"
        request = LibrarianRequest(
            request_id=request_id,
            goal=spec.goal,
            scope=spec.scope,
            sources=tuple(Source(s.note_id, s.title, s.body) for s in batch),
            topics=tuple(ctx.taxonomy.topics),
            sections=tuple(ctx.taxonomy.sections or ()),
            constraints=_request_constraints(ctx.constraints),
        )
        xml = render_request(request)
        plan: list[PlannedOperation] = []
        template: AnswerTemplate | None = None
        grammar: str | None = None
        if judgement is not None:
            plan = _plan(ctx, [(s.note_id, titles.get(s.note_id, "")) for s in batch], derived)
            template = render_template(request_id, plan)
            grammar = template_gbnf(template) if use_grammar else None
        elif use_grammar:
            grammar = _grammar_or_usage_error(
                librarian_grammar,
                request_id=request_id,
                note_ids=[s.note_id for s in batch],
                topics=ctx.taxonomy.topics,
                allowed_kinds=ctx.constraints.allowed_kinds,
                # One operation per note shown is what a request can use; fewer
                # operations also keep every grammar-admitted answer inside max_tokens.
                max_operations=min(ctx.constraints.max_operations, len(batch)),
                max_tokens=ctx.model_cfg.max_tokens,
            )
        requests.append(
            TurnRequest(
                turn=turn,
                request_id=request_id,
                request_xml=xml,
                messages=render_stage(
                    ctx.pack, "propose", {"request_xml": f"{xml}\n{user_ctx}" if user_ctx else xml}
                ),
                grammar=grammar,
                note_ids=tuple(s.note_id for s in batch),
                truncated_ids=frozenset(s.note_id for s in batch if s.truncated),
                plan=tuple(plan),
                template=template,
            )
        )
    cut = sorted({note_id for r in requests for note_id in r.truncated_ids})
    if cut:
        # One line, not one per note: a short window (the shipped 640 tokens) cuts many.
        shown = ", ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        rewrites = {"rewrite_note", "relink_note"} & set(ctx.constraints.allowed_kinds)
        ctx.warnings.append(
            f"{len(cut)} note(s) shown to the model cut to fit context_window_tokens="
            f"{ctx.constraints.context_window_tokens} (it saw only their start): {shown}"
            + (f"; {' and '.join(sorted(rewrites))} of them are refused" if rewrites else "")
        )
    return requests


def _plan(
    ctx: RunContext, notes: list[tuple[str, str]], derived: dict[str, str] | None
) -> list[PlannedOperation]:
    judgement = ctx.loaded.spec.judgement or Judgement()
    return plan_operations(
        notes,
        ctx.judgements,
        allowed_kinds=ctx.constraints.allowed_kinds,
        decide=judgement.decide,
        candidates=judgement.candidates,
        write_titles=judgement.write_titles,
        derived_titles=derived,
    )[: ctx.constraints.max_operations]


def _system_request(ctx: RunContext, plan: list[PlannedOperation]) -> TurnRequest:
    """The request the system answers itself: every operation fully decided (no slot)."""
    request_id = f"req_{ctx.run_id[:8]}_001"
    plan = [replace(op, operation_id=f"op_{i + 1}") for i, op in enumerate(plan)]
    note_ids = tuple(dict.fromkeys(op.target_note_id for op in plan))
    return TurnRequest(
        turn=0,
        request_id=request_id,
        request_xml=(
            f"<!-- {request_id}: {len(note_ids)} note(s) decided by the scorer; "
            "the model is not asked -->\n"
        ),
        messages=[],
        grammar=None,
        note_ids=note_ids,
        truncated_ids=frozenset(),
        plan=tuple(plan),
        template=render_template(request_id, plan),
    )


# judge_notes (the scorer's) loads its embedder through this module's ``load_embedder``:
# while a run is being judged, that puts the run's store-backed cache in front of it.
_RUN_BEING_JUDGED: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "toolwire_run_being_judged", default=None
)


def load_embedder(name: str) -> Embedder | None:
    """``judge.load_embedder``; inside ``build_requests`` of a run with a store, cached
    by text in the store (``store.evidence.CachingEmbedder``)."""
    inner = _judge.load_embedder(name)
    ctx = _RUN_BEING_JUDGED.get()
    if inner is None or ctx is None or not isinstance(ctx.store, Store):
        return inner
    ctx.embedder = CachingEmbedder(inner, ctx.store, read=not ctx.full)
    return ctx.embedder


def _notes_to_work_on(ctx: RunContext, workspace: Workspace) -> list[Any]:
    """The notes whose decision this run must act on; sets ``ctx.evidence``/``costs``.

    Every note's judgement is recomputed from cached embeddings (cheap: numpy). A note
    is *worked on* when its decision key changed (its bytes, the spec, the prompt pack,
    the embedder or model, or which notes are the user's examples of which topic) or
    its decision did (another note's new text or self-training can move it), or on
    ``--full``. Any other note is left as the run that decided it left it: no request,
    no model call, no row."""
    topics = ctx.taxonomy.topics
    shas = {n.note_id: hashlib.sha256(n.raw).hexdigest() for n in workspace.notes.values()}
    # The user's examples by note and topic: an example whose text changed is re-embedded
    # (by text), and a decision it moves is caught by the comparison below.
    examples = [
        (n.note_id, topic)
        for n in workspace.notes.values()
        if (topic := current_topic(n, topics)) is not None
    ]
    judgement = ctx.loaded.spec.judgement or Judgement()
    inputs = DecisionLedger.inputs_fingerprint(
        spec_hash=ctx.loaded.hash,
        embedder=embedder_id(ctx.embedder.inner) if ctx.embedder else judgement.embedder,
        model=f"{ctx.model_cfg.provider}:{ctx.model_cfg.name}|{ctx.pack.pack_hash}",
        examples=examples,
    )
    ledger = _ledger(ctx)
    ctx.previous = ledger.load() if ledger is not None else {}
    work = []
    for note in workspace.notes.values():
        j = ctx.judgements.get(note.note_id)
        sha = shas[note.note_id]
        record = NoteRecord(
            sha,
            decision_key(sha, inputs),
            j.decision if j else "none",
            j.best.topic if j and j.candidates else None,
        )
        ctx.evidence[note.note_id] = record
        if ctx.full or ctx.previous.get(note.note_id) != record:
            work.append(note)
    embedded = ctx.embedder
    ctx.costs = RunCosts(
        notes=len(workspace.notes),
        texts_embedded=embedded.misses if embedded else 0,
        embedding_hits=embedded.hits if embedded else 0,
        decisions_recomputed=len(work),
        decisions_reused=len(workspace.notes) - len(work),
        full_pass=ctx.full,
    )
    return work


def _ledger(ctx: RunContext) -> DecisionLedger | None:
    if not isinstance(ctx.store, Store):
        return None  # a render context, or a benchmark's stand-in store
    return DecisionLedger(ctx.store, str(ctx.workspace_root))


MAX_TITLE_CHARS_SHOWN = 200


def judge_notes(ctx: RunContext, workspace: Workspace) -> dict[str, NoteJudgement]:
    """The scorer's candidates and the keep/retag/defer decision for every note."""
    spec = ctx.loaded.spec
    topics = list(ctx.taxonomy.topics)
    judgement = spec.judgement or Judgement()
    evidence = [
        NoteEvidence(n.note_id, n.path, n.title, n.body, current_topic(n, topics))
        for n in workspace.notes.values()
    ]
    # with_progress: the CLI shows the embedding (it took minutes with nothing on screen).
    embedder = with_progress(load_embedder(judgement.embedder))
    scorer = TopicScorer(topics, ctx.taxonomy.descriptions, embedder)
    return {
        note.note_id: decide(
            note,
            candidates,
            min_confidence=float(ctx.constraints.min_confidence),
            switch_margin=judgement.switch_margin,
        )
        for note, candidates in zip(evidence, scorer.score(evidence), strict=True)
    }


def _grammar_or_usage_error(build: Callable[..., str], **kwargs: Any) -> str:
    """The request's grammar; a spec it cannot be built for is the user's to fix."""
    try:
        return build(**kwargs)
    except ValueError as exc:
        raise UsageError(
            f"cannot build the constrained-decoding grammar: {exc} "
            "(raise model.max_tokens, or set model.constrain: none)"
        ) from None


def _parse_for(ctx: RunContext, request_id: str) -> Callable[[Completion], LibrarianResponse]:
    strict = bool(ctx.constraints.strict_mode)

    def parse(completion: Completion) -> LibrarianResponse:
        response = parse_response(completion.text, strict=strict)
        if response.request_id != request_id:
            raise ProtocolError(
                code=LIBRARIAN_PARSE_FAILED,
                message=(
                    f"<request_id> is {response.request_id!r}; answer the request "
                    f"{request_id!r} and copy its request_id exactly."
                ),
                details=["REQUEST_ID_MISMATCH"],
            )
        return response

    return parse


def run_turn(
    ctx: RunContext,
    tr: TurnRequest,
    call: Callable[[CompletionRequest], Completion] | None = None,
) -> TurnOutcome[LibrarianResponse]:
    """Call the model for one request, repairing at most ``max_repair_retries`` times."""
    cfg = ctx.model_cfg

    def attempt_is_first(messages: list[Message]) -> bool:
        return messages is tr.messages  # a repair asks anew, without the template

    def make_request(messages: list[Message]) -> CompletionRequest:
        return CompletionRequest(
            messages=messages,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            grammar=tr.grammar,
            template=tr.template if attempt_is_first(messages) else None,
            variables={"request_id": tr.request_id},
        )

    def repair_messages(error: ProtocolError, original: str) -> list[Message]:
        bindings = {"errors": format_errors_for_repair(error), "original_response": original}
        return render_stage(ctx.pack, "validate_repair", bindings)

    if tr.template is not None and all(isinstance(p, str) for p in tr.template):
        return _answer_without_model(ctx, tr)
    return run_turn_with_repair(
        turn=tr.turn,
        request_id=tr.request_id,
        first_messages=tr.messages,
        call=_store_free_while_waiting(ctx, call or ctx.opened_provider.complete),
        make_request=make_request,
        parse=_parse_for(ctx, tr.request_id),
        repair_messages=repair_messages,
        max_repairs=ctx.constraints.max_repair_retries,
        on_attempt=lambda attempt: ctx.opened_store.record_attempt(ctx.run_id, attempt),
    )


def _answer_without_model(ctx: RunContext, tr: TurnRequest) -> TurnOutcome[LibrarianResponse]:
    """A request whose answer has no slot: the answer is the template, written by the
    system. Stored as the turn's attempt (no prompt: nothing was sent), never parsed
    back: ``validate_turn`` takes every operation from the plan (``conform``)."""
    assert tr.template is not None
    started = time.time()
    text = "".join(p for p in tr.template if isinstance(p, str))
    attempt = Attempt(
        turn=tr.turn,
        attempt=0,
        kind="initial",
        request_id=tr.request_id,
        prompt=[],
        raw_text=text,
        parse_ok=True,
        error_code=None,
        error_codes=(),
        input_tokens=0,
        output_tokens=0,
        latency_ms=(time.time() - started) * 1000.0,
        finish_reason="stop",
        started_at=started,
    )
    ctx.opened_store.record_attempt(ctx.run_id, attempt)
    response = LibrarianResponse(tr.request_id, "ok", "", (), ())
    return TurnOutcome(value=response, error=None, attempts=(attempt,))


def validate_turn(
    ctx: RunContext,
    workspace: Workspace,
    tr: TurnRequest,
    response: LibrarianResponse,
    prior: list[OperationOutcome],
) -> list[OperationOutcome]:
    """Check every proposed operation against the spec, the workspace and earlier turns.

    ``max_operations`` applies per request (the request tells the model its
    limit); ``prior`` lets a later turn see changes planned by earlier ones.
    The run keeps that planned view from turn to turn (``ctx.planned``), so a
    turn costs its own operations, not a replay of every earlier turn.
    """
    constraints = ctx.constraints
    if tr.template is not None:
        # Only this turn's notes: a copy of every note's text per turn made runs quadratic.
        texts = {}
        for note_id in tr.note_ids:
            note = workspace.notes.get(note_id)
            if note is not None:
                texts[note_id] = f"{note.path} {note.body}"
        response = _never_worse(ctx, conform(response, tr.plan, texts))
        if not tr.messages:  # the system's own answer: max_operations caps a model's
            constraints = constraints.model_copy(update={"max_operations": len(tr.plan)})
    held = ctx.planned
    if held is not None and held[0] is workspace and held[1] == len(prior):
        before = held[2]
    else:  # first turn, or a caller that validates out of order: replay what came before
        before = planned_view(workspace, prior)
        if before is workspace:
            before = _copy(workspace)
    # The running view is this run's own copy, updated in place turn after turn (linear in
    # the changes, not a copy of the workspace per change). A turn whose planned rewrite
    # may be refused afterwards (a note shown cut) works on a copy, so the refused change
    # never enters the view.
    may_refuse = bool(tr.truncated_ids) and bool(
        {"rewrite_note", "relink_note"} & set(constraints.allowed_kinds)
    )
    view = _copy(before) if may_refuse else before
    outcomes = validate_operations(
        response,
        view,
        turn=tr.turn,
        constraints=constraints,
        topics=ctx.taxonomy.topics,
        ops_so_far=0,
        seq_start=len(prior),
        in_place=True,
    )
    # A note shown truncated must not be rewritten from its visible half.
    checked = []
    for outcome in outcomes:
        op = outcome.operation
        if (
            outcome.status == "planned"
            and op.kind in ("rewrite_note", "relink_note")
            and op.target_note_id in tr.truncated_ids
        ):
            outcome = replace(
                outcome,
                status="rejected",
                code="NOTE_TRUNCATED_IN_REQUEST",
                detail="the request showed only part of this note; a rewrite would drop the rest",
            )
        checked.append(outcome)
    if may_refuse:
        view = planned_view(before, checked)
    ctx.planned = (workspace, len(prior) + len(checked), view)
    return checked


def _copy(workspace: Workspace) -> Workspace:
    return Workspace(workspace.root, workspace.notes, workspace.warnings)


def _never_worse(ctx: RunContext, response: LibrarianResponse) -> LibrarianResponse:
    """A topic the model chose (``decide: model``) is held to the scorer's rule: it must
    be clearly ahead of the note's current topic, else the note keeps its topic."""
    judgement = ctx.loaded.spec.judgement or Judgement()
    if judgement.decide != "model":
        return response
    kept = []
    for op in response.operations:
        j = ctx.judgements.get(op.target_note_id or "")
        if op.kind == "retag_note" and j is not None:
            chosen = [c for c in j.candidates if c.topic == op.body_markdown]
            again = decide(
                NoteEvidence(j.note_id, "", "", "", j.current),
                chosen + [c for c in j.candidates if c.topic != op.body_markdown],
                min_confidence=0.0,  # min_confidence is validation's: it defers
                switch_margin=judgement.switch_margin,
            )
            if again.decision != "retag":
                continue
        kept.append(op)
    return replace(response, operations=tuple(kept))


def apply_outcomes(
    ctx: RunContext, workspace: Workspace, outcomes: list[OperationOutcome]
) -> tuple[list[OperationOutcome], str, str | None]:
    """Apply planned operations through the journal (or only diff them on --dry-run)."""
    planned = [o for o in outcomes if o.status == "planned"]
    topics = ctx.taxonomy.topics
    changes = render_changes(workspace, [o.operation for o in planned], topics)
    diff = diff_plan(changes)
    ctx.changed = field_changes(changes, topics)
    if ctx.dry_run or not changes:
        return outcomes, diff, None
    sha = None
    with shielded():  # Ctrl-C/SIGTERM wait: the notes end all old or all new, never mixed
        apply_plan(ctx.workspace_root, ctx.run_id, changes)
        if ctx.commit:
            paths = sorted({c.path for c in changes})
            sha = git_commit(
                ctx.workspace_root, ctx.run_id, paths, ctx.changed, verify=ctx.commit_verify
            )
    applied = [replace(o, status="applied") if o.status == "planned" else o for o in outcomes]
    return applied, diff, sha


def finish_run(
    ctx: RunContext,
    *,
    status: str,
    error: ToolwireError | None,
    turns: int,
    outcomes: list[OperationOutcome],
    attempts: list[Attempt],
    diff: str = "",
    commit_sha: str | None = None,
) -> RunResult:
    """Write the report and the run's final rows in one store transaction."""
    result = RunResult(
        run_id=ctx.run_id,
        status=status,
        error_code=error.code if error else None,
        error_message=error.message if error else None,
        outcomes=outcomes,
        attempts=attempts,
        turns=turns,
        diff=diff,
        commit_sha=commit_sha,
        changes=ctx.changed,
        deferred=deferred_notes(ctx.workspace, outcomes, ctx.judgements),
        warnings=ctx.warnings,
    )
    markdown = render_markdown_report(ctx, result)
    if ctx.report_dir is not None:
        ctx.report_dir.mkdir(parents=True, exist_ok=True)
        result.report_path = ctx.report_dir / f"{ctx.run_id}.md"
        result.report_path.write_text(markdown, encoding="utf-8")
    ctx.opened_store.finish_run(
        ctx.run_id,
        status=status,
        error_code=result.error_code,
        error_message=result.error_message,
        turns=turns,
        operations=outcomes,
        tool_calls=[],
        report_markdown=markdown,
        flow_run_id=ctx.flow_run_id,
        note_changes=[(c.path, c.field, c.old, c.new) for c in result.changes],
    )
    if status == "ok":  # its deferred and misfiled notes: what `toolwire review` asks
        result.warnings += record_run_questions(
            ctx.opened_store, ctx.run_id, ctx.workspace_root, ctx.workspace, ctx.judgements
        )
    ctx.opened_store.record_warnings(ctx.run_id, result.warnings)
    return result


def _still_deferred(ctx: RunContext) -> str | None:
    """One line for the notes deferred by an earlier run that this run did not work on
    (nothing about them changed): they still wait. One line, not one per note: a
    nightly run must not store and print the same hundreds of notes every night."""
    if ctx.full or "defer" not in ctx.constraints.allowed_kinds:
        return None
    waiting = sorted(
        note_id
        for note_id, record in ctx.previous.items()
        if record.decision == "defer" and ctx.evidence.get(note_id) == record
    )
    if not waiting:
        return None
    shown = ", ".join(waiting[:3]) + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else "")
    return (
        f"{len(waiting)} note(s) still deferred from earlier runs, unchanged since: {shown} "
        "(toolwire review asks about them)"
    )


def remember_evidence(ctx: RunContext, result: RunResult) -> None:
    """Store what the run computed and reused, and, after a run that ended ``ok`` and
    wrote its changes, each note's decision record (so the next run skips what did not
    change). A dry or failed run changed nothing: its notes are still to be worked on.
    After an ok run, raw texts of ok runs older than the last ``keep_raw_runs`` go."""
    if not isinstance(ctx.store, Store):
        return
    try:
        record_run_costs(ctx.store, ctx.run_id, ctx.costs)
        if result.ok and not ctx.dry_run and ctx.loaded.spec.judgement is not None:
            DecisionLedger(ctx.store, str(ctx.workspace_root)).save(
                ctx.run_id, ctx.evidence, ctx.previous
            )
        if result.ok:
            ctx.store.prune_raw_texts(ctx.keep_raw_runs)
    except ToolwireError as exc:  # the run itself is stored; the next one recomputes more
        warning = f"per-note evidence not stored ({exc.message}); the next run recomputes it"
        result.warnings.append(warning)
        ctx.store.record_warnings(ctx.run_id, [warning])


StepRunner = Callable[..., Any]


def _direct(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def _run_librarian_steps(
    ctx: RunContext,
    *,
    call: Callable[[CompletionRequest], Completion] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    step: StepRunner = _direct,
) -> RunResult:
    """``run_librarian`` without the store release."""
    attempts: list[Attempt] = []
    outcomes: list[OperationOutcome] = []
    turns_done = 0

    def end(status: str, error: ToolwireError | None, diff: str = "", sha: str | None = None):
        # The user's profile learns afterwards, in toolwire.lifecycle (every job alike).
        result = step(
            "finish",
            lambda: finish_run(
                ctx,
                status=status,
                error=error,
                turns=turns_done,
                outcomes=outcomes,
                attempts=attempts,
                diff=diff,
                commit_sha=sha,
            ),
        )
        remember_evidence(ctx, result)
        return result

    try:
        workspace = step("load-workspace", load_workspace, ctx)
        requests = step("build-requests", build_requests, ctx, workspace)
        for tr in requests:
            turn = step(f"turn-{tr.turn + 1}", run_turn, ctx, tr, call)
            attempts.extend(turn.attempts)
            turns_done += 1
            if on_turn:
                on_turn(turns_done, len(requests))
            if not turn.ok:
                return end("Failed", turn.error)
            outcomes += step(
                f"validate-{tr.turn + 1}",
                validate_turn,
                ctx,
                workspace,
                tr,
                turn.value,
                outcomes,
            )
        outcomes, diff, sha = step("apply", apply_outcomes, ctx, workspace, outcomes)
    except ProviderError as exc:
        return end("Failed", exc)
    except ToolwireError as exc:
        end("Failed", exc)
        raise
    except Exception as exc:
        # Whatever escaped (a RecursionError, a bug): the run ends Failed with the
        # reason, never left `running` (issue #30 item 5); the cause stays chained.
        error = ToolwireError(
            f"internal error: {type(exc).__name__}: {exc}"[:500], code=INTERNAL_ERROR
        )
        end("Failed", error)
        raise error from exc
    return end("ok", None, diff, sha)


def run_librarian(
    ctx: RunContext,
    *,
    call: Callable[[CompletionRequest], Completion] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    step: StepRunner = _direct,
) -> RunResult:
    """The whole job. ``step(name, fn, *args)`` runs each step: directly by default,
    as a Prefect task under ``toolwire.flows`` (same composition, one place).

    The run's hold on the store file (taken by ``prepare_run``) ends here, however
    the run ends."""
    try:
        return _run_librarian_steps(ctx, call=call, on_turn=on_turn, step=step)
    finally:
        release_store(ctx)
