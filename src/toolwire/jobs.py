"""The table of jobs: the one place that knows which job a spec runs and how.

A job is a small record of functions (load, prepare, run, summarize) plus a
few facts (the transports it speaks, whether it writes its workspace, whether
it learns about the user, its Prefect flow). The CLI, batch, schedule and the
flows resolve a run's spec once (:func:`resolve_options`), look its job up here
(:func:`job_for`) and call those functions; nothing else asks "librarian or agent?".
A new job is one more table row.

Every job's context is a :class:`~toolwire.run.base.RunBase` (:data:`JobContext`) and
its result a :class:`JobResult`, which is all the run lifecycle (``toolwire.lifecycle``)
reads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from toolwire.agent import (
    AGENT_TRANSPORTS,
    AgentContext,
    AgentResult,
    load_agent_context,
    prepare_agent_run,
    run_agent,
)
from toolwire.agent.loop import render_first_request, render_side_request
from toolwire.domain import TRANSPORTS, Attempt
from toolwire.errors import UsageError
from toolwire.librarian.job import (
    RunContext,
    RunResult,
    build_requests,
    load_context,
    prepare_run,
    run_librarian,
)
from toolwire.librarian.journal.disk import journal_state
from toolwire.librarian.notes.workspace import Workspace
from toolwire.run.base import ResolvedSpec, RunBase, resolve_spec
from toolwire.run.steps import StepRunner
from toolwire.spec.settings import Settings

__all__ = [
    "JOBS",
    "Job",
    "JobContext",
    "JobResult",
    "OnTurn",
    "RunDetails",
    "RunOptions",
    "job_for",
    "resolve_options",
]

OnTurn = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a caller asks of one run; ``None`` means "the spec's (or the environment's)"."""

    spec_path: str
    workspace: str | None = None
    db: str | None = None
    model: str | None = None
    transport: str | None = None
    dry_run: bool = False
    commit: bool = False
    record: str | None = None
    user: str | None = None
    flow_run_id: str | None = None
    full: bool = False  # librarian: recompute every note, ignoring the store's evidence
    all_changes: bool = False  # librarian: --all, every change (no constraints.max_changes)
    commit_verify: bool = True  # False: --commit-no-verify (no hooks, no signing)
    # The spec as read once (resolve_options): every later step takes it instead of the
    # file. In process only: a flow's parameters are the fields above.
    resolved: ResolvedSpec | None = field(default=None, compare=False, repr=False)

    @property
    def spec(self) -> str | ResolvedSpec:
        """What a context loader takes: the resolved spec, else the file to read."""
        return self.resolved if self.resolved is not None else self.spec_path


# What every job's run context is once prepared: what its run row was written from, the
# provider its turns call, and its store with the run's one hold on the file.
JobContext = RunBase


class JobResult(Protocol):
    """What every job's run result says; the CLI and batch read only this."""

    run_id: str
    status: str  # "ok" | "Failed"
    error_code: str | None
    error_message: str | None
    turns: int
    attempts: list[Attempt]
    report_path: Path | None
    diff: str
    commit_sha: str | None

    @property
    def ok(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class RunDetails:
    """What a result shows beyond the summary line (the CLI prints it as it is)."""

    operations: tuple[tuple[str, str, str, str, str], ...] = ()  # turn, kind, target, status, code
    changes: tuple[tuple[str, str, str, str], ...] = ()  # note, field, old, new
    lines: tuple[str, ...] = ()  # one each: deferred notes, warnings
    # The run on one screen (counts, folders, a sample), printed instead of the tables
    # above when they are long or on a dry run; ``--details`` prints them all.
    plan: tuple[str, ...] = ()


C = TypeVar("C", bound=JobContext)
R = TypeVar("R", bound=JobResult)


@dataclass(frozen=True, slots=True)
class Job(Generic[C, R]):
    """One kind of job: the functions it runs with and the facts callers need. ``C`` and
    ``R`` are its own context and result types, so its functions need no casts."""

    name: str  # also its Prefect flow's name and the runs.job column
    transports: tuple[str, ...]
    unit: str  # what one progress step is: "request", "turn"
    load: Callable[[RunOptions, Settings], C]  # resolved, no store or provider
    prepare: Callable[[RunOptions, Settings], C]  # run row written
    run: Callable[[C, OnTurn | None, StepRunner], R]
    summarize: Callable[[R], str]
    details: Callable[[R], RunDetails]
    # The request(s) as they would be sent (`toolwire render`): ctx, grammar?, messages?
    render: Callable[[C, bool, bool], str]
    flow: str  # "module:attribute" of its Prefect flow (imported only to run or serve it)
    writes_on_dry_run: bool  # a dry run still changes the workspace
    plans_only_on_dry_run: bool  # --dry-run/--commit mean something to this job
    # Whether a run's notes were applied, read from the job's journal (workspace, run id);
    # None: the job writes no journal (an interrupted run then says nothing about notes).
    notes_state: Callable[[Path, str], str | None] | None

    def writes_workspace(self, options: RunOptions) -> bool:
        return self.writes_on_dry_run or not options.dry_run

    def remembers(self, options: RunOptions) -> bool:
        """Whether the run updates the user's profile (a dry run teaches nothing)."""
        return not options.dry_run


# -- the librarian -----------------------------------------------------------------------


def _load_args(options: RunOptions) -> dict[str, str | None]:
    """What resolving a spec takes (no store, no provider)."""
    return {"workspace": options.workspace, "model": options.model, "transport": options.transport}


def _prepare_args(options: RunOptions) -> dict[str, str | None]:
    """What opening a run takes, beyond resolving its spec."""
    return _load_args(options) | {
        "db": options.db,
        "record": options.record,
        "user": options.user,
        "flow_run_id": options.flow_run_id,
    }


def _librarian_load(options: RunOptions, settings: Settings) -> RunContext:
    return load_context(options.spec, settings=settings, **_load_args(options))


def _librarian_prepare(options: RunOptions, settings: Settings) -> RunContext:
    ctx = prepare_run(
        options.spec,
        dry_run=options.dry_run,
        commit=options.commit,
        settings=settings,
        full=options.full,
        **_prepare_args(options),
    )
    ctx.commit_verify = options.commit_verify
    ctx.all_changes = options.all_changes
    return ctx


def _librarian_run(ctx: RunContext, on_turn: OnTurn | None, step: StepRunner) -> RunResult:
    return run_librarian(ctx, on_turn=on_turn, step=step)


def _librarian_summary(result: RunResult) -> str:
    counts = Counter(o.status for o in result.outcomes)
    return "operations " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")


def _librarian_details(result: RunResult) -> RunDetails:
    """Each operation, what changed per note (old -> new), deferred notes and warnings."""
    return RunDetails(
        operations=tuple(
            (str(o.turn + 1), o.operation.kind, o.operation.target, o.status, o.code or "")
            for o in result.outcomes
        ),
        changes=tuple((c.path, c.field, c.old or "-", c.new or "-") for c in result.changes),
        lines=tuple(
            f"deferred {d.path}: {d.candidates or 'no candidates'} ({d.why})"
            for d in result.deferred
        )
        + tuple(f"warning: {w}" for w in result.warnings),
        plan=tuple(result.plan),
    )


def _librarian_render(ctx: RunContext, grammar: bool, messages: bool) -> str:
    """Every request: its XML (or all its messages), and its grammar when asked."""
    out: list[str] = []
    notes = Workspace.load(ctx.workspace_root, ctx.loaded.spec.notes)
    for tr in build_requests(ctx, notes):
        if messages:
            for message in tr.messages:
                out.append(f"=== turn {tr.turn + 1} {message['role']} ===\n{message['content']}\n")
        else:
            out.append(tr.request_xml.rstrip("\n") + "\n")
        if grammar and tr.grammar:
            out.append(f"=== turn {tr.turn + 1} grammar ===\n{tr.grammar}\n")
    return "".join(out)


# -- tool agents -------------------------------------------------------------------------


def _agent_options(options: RunOptions) -> RunOptions:
    if options.dry_run or options.commit:
        raise UsageError("--dry-run and --commit apply to librarian (xml_attrless) runs only")
    return options


def _agent_load(options: RunOptions, settings: Settings) -> AgentContext:
    return load_agent_context(options.spec, settings=settings, **_load_args(options))


def _agent_prepare(options: RunOptions, settings: Settings) -> AgentContext:
    _agent_options(options)
    return prepare_agent_run(options.spec, settings=settings, **_prepare_args(options))


def _agent_run(ctx: AgentContext, on_turn: OnTurn | None, step: StepRunner) -> AgentResult:
    return run_agent(ctx, on_turn=on_turn, step=step)


def _agent_summary(result: AgentResult) -> str:
    calls = Counter(str(c.get("status")) for c in result.tool_calls)
    return "tool calls " + (", ".join(f"{n} {s}" for s, n in sorted(calls.items())) or "none")


def _agent_details(result: AgentResult) -> RunDetails:
    return RunDetails()  # its tool calls are in the summary line and the report


def _agent_render(ctx: AgentContext, grammar: bool, messages: bool) -> str:
    """The first request: every message (always), the native tool list, the grammar."""
    request = render_first_request(ctx)
    out = []
    side = render_side_request(ctx)
    if side is not None:
        # What a grammar run sends first: the model picks the tool, and the request below
        # then offers only that tool (shown here with every tool it could pick).
        out += [f"=== first-tool choice: {m['role']} ===\n{m['content']}\n" for m in side.messages]
        if grammar and side.grammar:
            out.append(f"=== first-tool choice: grammar ===\n{side.grammar}\n")
    out += [f"=== {m['role']} ===\n{m.get('content') or ''}\n" for m in request.messages]
    if request.tools:
        out.append("=== tools ===\n" + json.dumps(request.tools, indent=2) + "\n")
    if grammar and request.grammar:
        out.append(f"=== grammar ===\n{request.grammar}\n")
    if grammar and request.json_schema:
        out.append("=== json schema ===\n" + json.dumps(request.json_schema, indent=2) + "\n")
    return "".join(out)


# Each Job(...) is checked against its own context and result types; callers hold a job of
# either kind, whose context and result go back to its own functions.
JOBS: dict[str, Job[Any, Any]] = {
    job.name: job
    for job in (
        Job(
            name="librarian",
            transports=("xml_attrless",),
            unit="request",
            load=_librarian_load,
            prepare=_librarian_prepare,
            run=_librarian_run,
            summarize=_librarian_summary,
            details=_librarian_details,
            render=_librarian_render,
            flow="toolwire.flows:librarian_flow",
            writes_on_dry_run=False,
            plans_only_on_dry_run=True,
            notes_state=journal_state,
        ),
        Job(
            name="agent",
            transports=AGENT_TRANSPORTS,
            unit="turn",
            load=_agent_load,
            prepare=_agent_prepare,
            run=_agent_run,
            summarize=_agent_summary,
            details=_agent_details,
            render=_agent_render,
            flow="toolwire.flows:agent_flow",
            writes_on_dry_run=True,  # its tools write files whatever --dry-run says
            plans_only_on_dry_run=False,
            notes_state=None,
        ),
    )
}


def resolve_options(options: RunOptions, settings: Settings) -> tuple[RunOptions, ResolvedSpec]:
    """``options`` carrying its spec read, validated and resolved (the run's one read),
    and that resolved spec."""
    if options.resolved is not None:
        return options, options.resolved
    resolved = resolve_spec(options.spec_path, settings, options.model, options.transport)
    return replace(options, resolved=resolved), resolved


def job_for(resolved: ResolvedSpec) -> Job[Any, Any]:
    """The job that runs a spec under the transport it resolved to."""
    for job in JOBS.values():
        if resolved.transport in job.transports:
            return job
    raise UsageError(  # a transport no job speaks: a table row is missing
        f"no job speaks transport {resolved.transport!r}; known: {', '.join(TRANSPORTS)}"
    )
