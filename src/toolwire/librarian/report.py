"""Per-run markdown report: what was applied, rejected and deferred, and why."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from toolwire.run.report_tables import attempts_table, cell

__all__ = ["render_markdown_report"]


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
    """Markdown for one run; ``ctx`` is a RunContext, ``result`` a RunResult."""
    spec = ctx.loaded.spec
    elapsed = time.time() - ctx.started_at
    statuses = Counter(o.status for o in result.outcomes)
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    lines = [
        f"# toolwire run `{result.run_id}`",
        "",
        f"- status: **{result.status}**"
        + (
            f" (`{result.error_code}`: {cell(result.error_message, 200)})"
            if result.error_code
            else ""
        ),
        f"- spec: `{spec.name}` v{spec.version}, hash `{ctx.loaded.hash}`",
        f"- prompt pack: `{ctx.pack.dir.name}`, hash `{ctx.pack.pack_hash}`",
        f"- model: `{ctx.model_cfg.name}` (constrain: {ctx.model_cfg.constrain}), "
        f"transport `{ctx.transport}`",
        f"- workspace: `{ctx.workspace_root}`" + (" (dry run)" if ctx.dry_run else ""),
        f"- turns: {result.turns}, attempts: {len(result.attempts)}, repairs: {repairs}",
        f"- operations: {statuses.get('applied', 0)} applied, {statuses.get('planned', 0)} "
        f"planned, {statuses.get('rejected', 0)} rejected, {statuses.get('deferred', 0)} deferred",
        f"- wall time: {elapsed:.1f} s, model time: "
        f"{sum(a.latency_ms for a in result.attempts) / 1000:.1f} s",
    ]
    if result.commit_sha:
        lines.append(f"- git commit: `{result.commit_sha}`")
    lines += _what_changed(result)
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
    lines += attempts_table(result.attempts)
    if result.diff:
        lines += ["", "## Changes", "", "```diff", result.diff.rstrip("\n"), "```"]
    lines.append("")
    return "\n".join(lines)
