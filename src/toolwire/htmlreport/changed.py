"""The page's opening section: what the runs changed in the notes, or why nothing.

It was a collapsed part of each run further down; a reader opening the page wants it
first. A run's state is shown as the store has it (ok, Failed, running, or whatever
a job records), and a run whose changes ``toolwire undo`` took back says undone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from toolwire.htmlreport.calls import changes_table
from toolwire.htmlreport.data import ReportData, plural, run_state
from toolwire.htmlreport.svg import esc

__all__ = ["what_changed", "why_nothing_changed"]


def why_nothing_changed(run: dict[str, Any], ops: list[dict[str, Any]]) -> str:
    """Why a run changed no note, as words after "the run" (counted per reason)."""
    if run["job"] == "agent":
        return "ran tools (a tool agent changes no notes)"
    if run["status"] == "running":
        return "is still running"
    if run["error_code"]:
        return f"ended {run['status']} ({run['error_code']})"
    if not ops:
        return "found nothing to change"
    states = sorted({str(o["status"]) for o in ops})
    return f"set every operation aside ({', '.join(states)})"


def what_changed(data: ReportData) -> str:
    """Per run that changed notes (newest first): old -> new per field; then one line
    counting the runs that changed nothing, by reason."""
    parts = []
    quiet: Counter[str] = Counter()
    for run in reversed(data.runs):
        run_id, changes = run["run_id"], data.changes.get(run["run_id"], [])
        if not changes:
            quiet[why_nothing_changed(run, data.operations.get(run_id, []))] += 1
            continue
        notes = len({c["path"] for c in changes})
        state = (
            "undone"
            if run["ops_undone"]
            else "planned (dry run, nothing written)"
            if run["dry_run"]
            else "applied"
        )
        parts.append(
            f'<h3><a href="#run-{esc(run_id)}"><code>{esc(run_id[:12])}</code></a> '
            f"{esc(run['spec_name'])}: {plural(notes, 'note')} {esc(state)}"
            f' <span class="st-{esc(run["status"])}">({esc(run_state(run))})</span></h3>'
            + changes_table(changes)
        )
    if len(data.runs) == 1 and quiet:
        parts.append(f"<p><b>Nothing changed</b>: the run {esc(next(iter(quiet)))}.</p>")
    elif quiet:
        counted = "; ".join(f"{n} {esc(reason)}" for reason, n in quiet.most_common())
        parts.append(f"<p>{plural(sum(quiet.values()), 'run')} changed no note: {counted}.</p>")
    return "".join(parts) or "<p>No runs.</p>"
