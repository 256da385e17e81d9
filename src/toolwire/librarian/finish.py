"""The end of a librarian run: the planned changes applied through the journal (or only
diffed on ``--dry-run``), then the report and the run's final rows.
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.domain import Attempt, OperationOutcome
from toolwire.errors import ToolwireError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.write_blocker import write_blocker
from toolwire.librarian.context import RunContext, RunResult
from toolwire.librarian.decisions import evidence_after_apply
from toolwire.librarian.journal.disk import read_current
from toolwire.librarian.journal.git_commit import git_commit
from toolwire.librarian.journal.write_ahead import apply_plan, diff_plan
from toolwire.librarian.notes.changes import FileChange, render_changes
from toolwire.librarian.notes.conventions import describe_conventions
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.report import render_markdown_report
from toolwire.librarian.review import record_run_questions
from toolwire.librarian.summary import (
    deferred_notes,
    field_changes,
    misfiled_warnings,
    plan_lines,
)
from toolwire.run.end import record_run_end
from toolwire.run.interrupts import shielded

__all__ = [
    "MAX_CHANGES",
    "NOTE_CHANGED",
    "NOTE_READ_ONLY",
    "NotCommitted",
    "apply_outcomes",
    "finish_run",
]

NOTE_READ_ONLY = "NOTE_READ_ONLY"  # the note or its folder is read-only: left as it is
NOTE_CHANGED = "NOTE_CHANGED"  # edited, removed or replaced since it was read: left as it is
MAX_CHANGES = "MAX_CHANGES"  # over constraints.max_changes: the next run writes it


def apply_outcomes(
    ctx: RunContext, workspace: Workspace, outcomes: list[OperationOutcome]
) -> tuple[list[OperationOutcome], str, str | None]:
    """Apply planned operations through the journal (or only diff them on --dry-run)."""
    topics = ctx.taxonomy.topics
    outcomes = _leave_untouchable(ctx, workspace, outcomes)
    planned = [o for o in outcomes if o.status == "planned"]
    changes = render_changes(workspace, [o.operation for o in planned], topics)
    if not ctx.all_changes and len(changes) > ctx.constraints.max_changes:
        outcomes = _hold_over_cap(ctx, workspace, outcomes, changes)
        planned = [o for o in outcomes if o.status == "planned"]
        changes = render_changes(workspace, [o.operation for o in planned], topics)
    diff = diff_plan(changes)
    ctx.changed = field_changes(changes, topics)
    if ctx.dry_run or not changes:
        return outcomes, diff, None
    sha = None
    applied = [replace(o, status="applied") if o.status == "planned" else o for o in outcomes]
    with shielded():  # Ctrl-C/SIGTERM wait: the notes end all old or all new, never mixed
        apply_plan(ctx.workspace_root, ctx.run_id, changes)
        evidence_after_apply(ctx, workspace, changes)
        if ctx.commit:
            paths = sorted({c.path for c in changes})
            try:
                sha = git_commit(
                    ctx.workspace_root, ctx.run_id, paths, ctx.changed, verify=ctx.commit_verify
                )
            except ToolwireError as exc:  # a hook or the signer refused: the notes changed
                raise NotCommitted(exc, applied, diff) from exc
    return applied, diff, sha


def _hold_over_cap(
    ctx: RunContext,
    workspace: Workspace,
    outcomes: list[OperationOutcome],
    changes: list[FileChange],
) -> list[OperationOutcome]:
    """Every planned operation on a note past the first ``max_changes`` changed notes,
    deferred (``MAX_CHANGES``) and not remembered as decided: the next run (a scheduled
    one too) proposes it again, so a vault is worked through ``max_changes`` at a time."""
    cap = ctx.constraints.max_changes
    held = {c.path for c in changes[cap:]}
    for path in held:
        note = workspace.note_at(path)
        if note is not None:
            ctx.evidence.pop(note.note_id, None)
    ctx.warnings.append(
        f"{len(held)} more note(s) to change past constraints.max_changes={cap}: the next "
        "run continues with them (toolwire run --all writes every one now)"
    )
    detail = f"past constraints.max_changes={cap}: the next run writes it"
    return [
        replace(o, status="deferred", code=MAX_CHANGES, detail=detail)
        if o.status == "planned" and o.path in held
        else o
        for o in outcomes
    ]


class NotCommitted(WorkspaceError):
    """The notes were applied but ``--commit`` could not commit them (a hook refused,
    signing failed): the error, with the applied outcomes and the diff, so the run's
    rows say applied, as the notes are (they said planned: issue 47)."""

    def __init__(self, error: ToolwireError, outcomes: list[OperationOutcome], diff: str) -> None:
        super().__init__(error.message, code=error.code)
        self.outcomes = outcomes
        self.diff = diff

    def __reduce__(self) -> tuple[object, ...]:  # a Prefect task's error may be pickled
        return (
            NotCommitted,
            (ToolwireError(self.message, code=self.code), self.outcomes, self.diff),
        )


def _leave_untouchable(
    ctx: RunContext, workspace: Workspace, outcomes: list[OperationOutcome]
) -> list[OperationOutcome]:
    """Planned changes to notes that cannot or must not be written now, rejected with a
    warning each while the others apply (dry runs say it too):

    - ``NOTE_READ_ONLY``: the note or its folder is read-only; the user's ``chmod -w``
      is a "leave it" (one such folder failed the whole apply with a bare "Permission
      denied");
    - ``NOTE_CHANGED``: edited, removed or replaced since it was read (an editor's
      autosave during a long run failed the whole run; ``apply_plan`` still refuses
      what changes after this check).

    Neither is remembered as done: the next run proposes it again."""
    paths = sorted({o.path for o in outcomes if o.status == "planned" and o.path})
    if not paths:
        return outcomes
    blocked: dict[str, tuple[str, str]] = {}
    with Confined(workspace.root) as fs:
        for path in paths:
            if why := write_blocker(fs, path):
                blocked[path] = (NOTE_READ_ONLY, why)
            elif why := _changed_since_read(fs, workspace, path):
                blocked[path] = (NOTE_CHANGED, why)
    for path, (_, why) in blocked.items():
        ctx.warnings.append(f"left {path} as it is: {why}")
        note = workspace.note_at(path)
        if note is not None:
            ctx.evidence.pop(note.note_id, None)
    return [
        replace(o, status="rejected", code=blocked[o.path][0], detail=blocked[o.path][1])
        if o.status == "planned" and o.path in blocked
        else o
        for o in outcomes
    ]


def _changed_since_read(fs: Confined, workspace: Workspace, path: str) -> str | None:
    note = workspace.note_at(path)
    try:
        now = read_current(fs, path)
    except (OSError, WorkspaceError) as exc:
        return f"it cannot be read now ({getattr(exc, 'message', None) or exc})"
    if note is None:
        return None if now is None else "a file appeared at its path since the notes were read"
    if now is None:
        return "removed since it was read"
    return None if now == note.raw else "edited since it was read (the next run judges it again)"


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
    traceback: str | None = None,
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
        traceback=traceback,
        changes=ctx.changed,
        deferred=deferred_notes(ctx.workspace, outcomes, ctx.judgements),
        # misfiled notes kept as the user filed them: counted, never silent
        warnings=ctx.warnings + misfiled_warnings(ctx.workspace, ctx.judgements),
        plan=plan_lines(
            outcomes,
            ctx.changed,
            describe_conventions(ctx.workspace.conventions) if ctx.workspace else "",
        ),
    )
    record_run_end(
        ctx,
        result,
        render_markdown_report(ctx, result),
        operations=outcomes,
        note_changes=[(c.path, c.field, c.old, c.new) for c in result.changes],
    )
    if status == "ok":  # its deferred and misfiled notes: what `toolwire review` asks
        result.warnings += record_run_questions(
            ctx.opened_store, ctx.run_id, ctx.workspace_root, ctx.workspace, ctx.judgements
        )
    ctx.opened_store.record_warnings(ctx.run_id, result.warnings)
    return result
