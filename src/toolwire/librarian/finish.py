"""The end of a librarian run: the planned changes applied through the journal (or only
diffed on ``--dry-run``), then the report and the run's final rows.
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.domain import Attempt, OperationOutcome
from toolwire.errors import ToolwireError
from toolwire.files.confined import Confined
from toolwire.interrupts import shielded
from toolwire.librarian.changes import render_changes
from toolwire.librarian.context import RunContext, RunResult
from toolwire.librarian.decisions import evidence_after_apply
from toolwire.librarian.git_commit import git_commit
from toolwire.librarian.journal import apply_plan, diff_plan
from toolwire.librarian.review import record_run_questions
from toolwire.librarian.summary import deferred_notes, field_changes, misfiled_warnings
from toolwire.librarian.workspace import Workspace
from toolwire.report import render_markdown_report
from toolwire.runend import record_run_end

__all__ = ["NOTE_READ_ONLY", "apply_outcomes", "finish_run"]

NOTE_READ_ONLY = "NOTE_READ_ONLY"  # the note or its folder is read-only: left as it is


def apply_outcomes(
    ctx: RunContext, workspace: Workspace, outcomes: list[OperationOutcome]
) -> tuple[list[OperationOutcome], str, str | None]:
    """Apply planned operations through the journal (or only diff them on --dry-run)."""
    topics = ctx.taxonomy.topics
    outcomes = _leave_read_only(ctx, workspace, outcomes)
    planned = [o for o in outcomes if o.status == "planned"]
    changes = render_changes(workspace, [o.operation for o in planned], topics)
    diff = diff_plan(changes)
    ctx.changed = field_changes(changes, topics)
    if ctx.dry_run or not changes:
        return outcomes, diff, None
    sha = None
    with shielded():  # Ctrl-C/SIGTERM wait: the notes end all old or all new, never mixed
        apply_plan(ctx.workspace_root, ctx.run_id, changes)
        evidence_after_apply(ctx, workspace, changes)
        if ctx.commit:
            paths = sorted({c.path for c in changes})
            sha = git_commit(
                ctx.workspace_root, ctx.run_id, paths, ctx.changed, verify=ctx.commit_verify
            )
    applied = [replace(o, status="applied") if o.status == "planned" else o for o in outcomes]
    return applied, diff, sha


def _leave_read_only(
    ctx: RunContext, workspace: Workspace, outcomes: list[OperationOutcome]
) -> list[OperationOutcome]:
    """Planned changes to read-only notes or folders, rejected (``NOTE_READ_ONLY``) with
    a warning each: the user's ``chmod -w`` is a "leave it", and one such folder no
    longer fails the whole apply with a bare "Permission denied" (dry runs say it too)."""
    paths = sorted({o.path for o in outcomes if o.status == "planned" and o.path})
    if not paths:
        return outcomes
    with Confined(workspace.root) as fs:
        blocked = {p: why for p in paths if (why := fs.write_blocker(p))}
    for path, why in blocked.items():
        ctx.warnings.append(f"left {path} as it is: {why}")
        note = workspace.note_at(path)
        if note is not None:  # not remembered as done: the next run proposes it again
            ctx.evidence.pop(note.note_id, None)
    return [
        replace(o, status="rejected", code=NOTE_READ_ONLY, detail=blocked[o.path])
        if o.status == "planned" and o.path in blocked
        else o
        for o in outcomes
    ]


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
        # misfiled notes kept as the user filed them: counted, never silent
        warnings=ctx.warnings + misfiled_warnings(ctx.workspace, ctx.judgements),
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
