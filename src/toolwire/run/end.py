"""What every job does when its run ends: the report file, then the run's final rows
(operations, tool calls, note changes, report and the runs row) in one store transaction.

Shared by the librarian (``librarian.finish``) and tool agents (``agent.loop``), so both
end a run the same way; what each job adds afterwards (the librarian's review questions
and warnings) stays with the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from toolwire.domain import OperationOutcome
from toolwire.run.base import RunBase

__all__ = ["EndingRun", "record_run_end"]


class EndingRun(Protocol):
    """What a job's result holds when its run ends."""

    run_id: str
    status: str
    error_code: str | None
    error_message: str | None
    turns: int
    report_path: Path | None


def record_run_end(
    ctx: RunBase,
    result: EndingRun,
    markdown: str,
    *,
    operations: list[OperationOutcome] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    note_changes: Sequence[tuple[str, str, str, str]] = (),
) -> None:
    """Write ``markdown`` to the run's report file (``result.report_path``), then the
    run's final rows in one transaction: all of it lands or none does."""
    if ctx.report_dir is not None:
        ctx.report_dir.mkdir(parents=True, exist_ok=True)
        result.report_path = ctx.report_dir / f"{ctx.run_id}.md"
        result.report_path.write_text(markdown, encoding="utf-8")
    assert ctx.store is not None, "a run's store is open until it ends"
    ctx.store.finish_run(
        ctx.run_id,
        status=result.status,
        error_code=result.error_code,
        error_message=result.error_message,
        turns=result.turns,
        operations=operations or [],
        tool_calls=tool_calls or [],
        report_markdown=markdown,
        flow_run_id=ctx.flow_run_id,
        note_changes=note_changes,
    )
