"""Per-run markdown report: what was applied, rejected and deferred, and why."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

__all__ = ["render_markdown_report"]


def _cell(text: object, limit: int = 80) -> str:
    """One table cell: single line, pipes escaped, bounded length."""
    value = " ".join(str(text if text is not None else "").split()).replace("|", "\\|")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _what_changed(result: Any) -> list[str]:
    """Old -> new per changed field, the deferred notes with their candidates, warnings."""
    changed = "applied" if any(o.status == "applied" for o in result.outcomes) else "planned"
    lines = ["", f"## What changed ({changed})", ""]
    if result.changes:
        lines += ["| note | field | old | new |", "|---|---|---|---|"]
        lines += [
            f"| {_cell(c.path, 60)} | {c.field} | {_cell(c.old) or '—'} | {_cell(c.new) or '—'} |"
            for c in result.changes
        ]
    else:
        lines.append("No note changed.")
    if result.deferred:
        lines += ["", "## Deferred", "", "| note | best candidates | why |", "|---|---|---|"]
        lines += [
            f"| {_cell(d.path, 60)} | {_cell(d.candidates) or '—'} | {_cell(d.why, 160)} |"
            for d in result.deferred
        ]
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {_cell(w, 300)}" for w in result.warnings]
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
            f" (`{result.error_code}`: {_cell(result.error_message, 200)})"
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
                f"| {o.turn + 1} | {_cell(op.operation_id, 20)} | {op.kind} | "
                f"{_cell(op.target, 40)} | {o.status} | {o.code or ''} | "
                f"{_cell(o.detail or op.reason)} | {op.confidence:.2f} |"
            )
    else:
        lines.append("No operations.")
    lines += [
        "",
        "## Attempts",
        "",
        "| turn | attempt | kind | parsed | codes | tokens in/out | ms |",
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for a in result.attempts:
        codes = ", ".join(([a.error_code] if a.error_code else []) + list(a.error_codes))
        lines.append(
            f"| {a.turn + 1} | {a.attempt} | {a.kind} | {'yes' if a.parse_ok else 'no'} | "
            f"{_cell(codes, 60)} | {a.input_tokens or 0}/{a.output_tokens or 0} | "
            f"{a.latency_ms:.0f} |"
        )
    if result.diff:
        lines += ["", "## Changes", "", "```diff", result.diff.rstrip("\n"), "```"]
    lines.append("")
    return "\n".join(lines)
