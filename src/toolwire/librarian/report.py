"""Per-run markdown report: what was applied, rejected and deferred, and why."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from toolwire.run.report_tables import attempts_table, cell
from toolwire.store.values import utcnow

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = [
    "MAX_TRACEBACK",
    "headline",
    "mark_undone",
    "record_undone",
    "render_markdown_report",
    "stored_traceback",
]

MAX_TRACEBACK = 20_000  # characters, the end kept (the innermost frames)
TRACEBACK_HEADING = "## Traceback"


def headline(result: Any, dry_run: bool) -> str:
    """The report's first line: what the run changed, or why nothing."""
    notes = len({c.path for c in result.changes})
    statuses = Counter(o.status for o in result.outcomes)
    if result.status != "ok" and not statuses.get("applied"):
        return f"**Nothing changed**: the run ended {result.status} (`{result.error_code}`)."
    if notes and dry_run:
        return f"**Nothing changed** (dry run): {_notes(notes)} would change, as planned below."
    if notes:
        verb = "changed" if statuses.get("applied") else "planned"
        extra = f"; then the run ended {result.status} (`{result.error_code}`)"
        return f"**{_notes(notes)} {verb}**{extra if result.status != 'ok' else ''}."
    if not result.outcomes:
        return "**Nothing changed**: no note needed a change."
    kept = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    return f"**Nothing changed**: every operation was set aside ({kept})."


def _notes(n: int) -> str:
    return f"{n} note{'s' if n != 1 else ''}"


def _what_changed(result: Any) -> list[str]:
    """Old -> new per changed field, the deferred notes with their candidates, warnings."""
    changed = "applied" if any(o.status == "applied" for o in result.outcomes) else "planned"
    lines = ["", f"## What changed ({changed})", ""]
    if result.changes:
        lines += ["| note | field | old | new |", "|---|---|---|---|"]
        lines += [
            f"| {cell(c.path, 60)} | {c.field} | {cell(c.old) or '—'} | {cell(c.new) or '—'} |"
            for c in result.changes
        ]
    else:
        lines.append("No note changed.")
    if result.deferred:
        lines += ["", "## Deferred", "", "| note | best candidates | why |", "|---|---|---|"]
        lines += [
            f"| {cell(d.path, 60)} | {cell(d.candidates) or '—'} | {cell(d.why, 160)} |"
            for d in result.deferred
        ]
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {cell(w, 300)}" for w in result.warnings]
    return lines


def render_markdown_report(ctx: Any, result: Any) -> str:
    """Markdown for one run; ``ctx`` is a RunContext, ``result`` a RunResult.

    It opens on what the run changed (or why nothing); the model's lines and the
    attempts table appear only when the run asked a model (a scorer-only run did not:
    it showed "model time: 0.0 s" and an empty table)."""
    spec = ctx.loaded.spec
    elapsed = time.time() - ctx.started_at
    statuses = Counter(o.status for o in result.outcomes)
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    asked_model = bool(result.attempts)
    lines = [f"# toolwire run `{result.run_id}`", "", headline(result, ctx.dry_run)]
    lines += _what_changed(result)
    lines += [
        "",
        "## Run",
        "",
        f"- status: **{result.status}**"
        + (
            f" (`{result.error_code}`: {cell(result.error_message, 200)})"
            if result.error_code
            else ""
        ),
        f"- spec: `{spec.name}` v{spec.version}, hash `{ctx.loaded.hash}`",
        f"- prompt pack: `{ctx.pack.dir.name}`, hash `{ctx.pack.pack_hash}`",
    ]
    if asked_model:
        lines += [
            f"- model: `{ctx.model_cfg.name}` (constrain: {ctx.model_cfg.constrain}), "
            f"transport `{ctx.transport}`",
        ]
    lines += [
        f"- workspace: `{ctx.workspace_root}`" + (" (dry run)" if ctx.dry_run else ""),
    ]
    if asked_model:
        lines.append(
            f"- turns: {result.turns}, attempts: {len(result.attempts)}, repairs: {repairs}"
        )
    lines += [
        f"- operations: {statuses.get('applied', 0)} applied, {statuses.get('planned', 0)} "
        f"planned, {statuses.get('rejected', 0)} rejected, {statuses.get('deferred', 0)} deferred",
        f"- wall time: {elapsed:.1f} s"
        + (
            f", model time: {sum(a.latency_ms for a in result.attempts) / 1000:.1f} s"
            if asked_model
            else " (no model asked)"
        ),
    ]
    if result.commit_sha:
        lines.append(f"- git commit: `{result.commit_sha}`")
    lines += ["", "## Operations", ""]
    if result.outcomes:
        lines += [
            "| turn | op | kind | target | status | code | detail / reason | conf |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for o in result.outcomes:
            op = o.operation
            lines.append(
                f"| {o.turn + 1} | {cell(op.operation_id, 20)} | {op.kind} | "
                f"{cell(op.target, 40)} | {o.status} | {o.code or ''} | "
                f"{cell(o.detail or op.reason)} | {op.confidence:.2f} |"
            )
    else:
        lines.append("No operations.")
    if asked_model:
        lines += attempts_table(result.attempts)
    if result.traceback:
        lines += ["", TRACEBACK_HEADING, "", "```text", result.traceback.rstrip("\n"), "```"]
    if result.diff:
        lines += ["", "## Changes", "", "```diff", result.diff.rstrip("\n"), "```"]
    lines.append("")
    return "\n".join(lines)


def stored_traceback(markdown: str | None) -> str | None:
    """The traceback section of a stored report (an internal error's), if it has one."""
    found = re.search(rf"^{TRACEBACK_HEADING}\n\n```text\n(.*?)\n```$", markdown or "", re.M | re.S)
    return found.group(1) if found else None


def mark_undone(markdown: str, when: str, restored: int) -> str:
    """The stored report of a run that ``toolwire undo`` took back: a line under its
    title says so (the rest is what the run did, kept as it was)."""
    line = (
        f"**Undone** {when} (`toolwire undo`): {_notes(restored)} restored to their bytes "
        "before the run; the changes below are no longer in the notes."
    )
    title, sep, rest = markdown.partition("\n\n")
    return f"{title}{sep}{line}\n\n{rest}" if sep else f"{markdown}\n\n{line}\n"


def record_undone(store: Store, run_id: str, restored: int) -> None:
    """Mark the run's stored report, and its file beside the store, undone."""
    when = utcnow().strftime("%Y-%m-%d %H:%M UTC")
    markdown = store.update_report(run_id, lambda text: mark_undone(text, when, restored))
    path = store.path.parent / "reports" / f"{run_id}.md"
    if markdown is not None and path.is_file():
        path.write_text(markdown, encoding="utf-8")
