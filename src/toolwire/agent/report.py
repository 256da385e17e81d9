"""Per-run markdown report of a tool agent: the final report, every call, every attempt."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING

from toolwire.agent.quotes import QUOTES_HEADING
from toolwire.domain import FinalReport
from toolwire.run.report_tables import attempts_table, cell

if TYPE_CHECKING:
    from toolwire.agent.context import AgentContext
    from toolwire.agent.loop import AgentResult

__all__ = ["render_agent_report"]


def _final_section(report: FinalReport | None) -> list[str]:
    if report is None:
        return ["No final report."]
    content = report.content
    body = content if isinstance(content, str) else json.dumps(content, indent=2, default=str)
    lines = [f"- status: **{report.status}**, format: `{report.format}`"]
    metadata = {k: v for k, v in report.metadata.items() if k != "tool_results"}
    if metadata:
        lines.append(f"- metadata: `{json.dumps(metadata, sort_keys=True, default=str)}`")
    fence = "````" if "```" in body else "```"
    lines += ["", fence, body.rstrip("\n"), fence]
    quoted = report.metadata.get("tool_results")
    if quoted:  # agent.quotes: the system's, not the model's
        lines += ["", QUOTES_HEADING, "", *(cell(q, 500) for q in quoted)]
    return lines


def render_agent_report(ctx: AgentContext, result: AgentResult) -> str:
    """Markdown for one agent run."""
    spec = ctx.loaded.spec
    elapsed = time.time() - ctx.started_at
    repairs = sum(1 for a in result.attempts if a.kind == "repair")
    statuses = Counter(row["status"] for row in result.tool_calls)
    error = (
        f" (`{result.error_code}`: {cell(result.error_message, 200)})" if result.error_code else ""
    )
    if result.status == "unchecked":
        error = " (the spec declares no check: nothing proved the task done)"
    lines = [
        f"# toolwire agent run `{result.run_id}`",
        "",
        f"- status: **{result.status}**{error}",
        f"- spec: `{spec.name}` v{spec.version}, hash `{ctx.loaded.hash}`",
        f"- prompt pack: `{ctx.pack.dir.name}`, hash `{ctx.pack.pack_hash}`",
        f"- model: `{ctx.model_cfg.name}` (constrain: {ctx.model_cfg.constrain}), "
        f"transport `{ctx.transport}`",
        f"- workspace: `{ctx.workspace_root}`",
        f"- turns: {result.turns}, attempts: {len(result.attempts)}, repairs: {repairs}",
        "- tool calls: " + (", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none"),
        f"- wall time: {elapsed:.1f} s, model time: "
        f"{sum(a.latency_ms for a in result.attempts) / 1000:.1f} s",
        "",
        "## Final report",
        "",
        *_final_section(result.final_report),
        "",
        "## Tool calls",
        "",
    ]
    if result.tool_calls:
        lines += [
            "| turn | seq | slot | tool | source | status | ms | error |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in result.tool_calls:
            lines.append(
                f"| {row['turn'] + 1} | {row['seq']} | {cell(row.get('slot'), 30)} | "
                f"{cell(row.get('command') or row.get('tool'), 30)} | {row.get('source')} | "
                f"{row['status']} | {row.get('duration_ms') or 0:.0f} | "
                f"{cell(row.get('error'), 60)} |"
            )
    else:
        lines.append("No tool calls.")
    lines += attempts_table(result.attempts, parsed="usable")
    if result.progress:
        lines += ["", "## Progress", "", *[f"- {cell(p, 200)}" for p in result.progress]]
    lines.append("")
    return "\n".join(lines)
