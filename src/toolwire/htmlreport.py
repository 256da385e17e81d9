"""A self-contained HTML report over stored runs: run table, charts, operations with diffs.

One file, no external assets (no scripts, fonts, stylesheets or images to
fetch): CSS is inline and the charts are inline SVG drawn here, so the page
opens the same from a mail attachment, a CI artifact or an air-gapped box.
Every value from the store is escaped; model output is untrusted text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolwire.errors import RunNotFound

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = ["ReportData", "collect_report", "render_html", "write_html_report"]

DEFAULT_LIMIT = 200
_DIFF = re.compile(r"## Changes\n\n```diff\n(.*)\n```\s*$", re.DOTALL)
_COLORS = ("#3b6fb6", "#e08a2e", "#4a9a5b", "#b64a4a")

# Scoped by a list parameter: list_contains(?::VARCHAR[], run_id).
_RUNS_SQL = """
SELECT s.run_id, s.started_at, s.spec_name, s.spec_hash, s.provider, s.model, s.transport,
       s.status, s.error_code, s.turns, s.attempts, s.repairs, s.first_try_valid_turns,
       s.input_tokens, s.output_tokens, s.ops_applied, s.ops_rejected, s.ops_deferred,
       s.duration_s, r.batch_id
FROM run_summary s JOIN runs r USING (run_id)
WHERE list_contains(?::VARCHAR[], s.run_id)
ORDER BY s.started_at, s.run_id
"""
_REPAIR_SQL = """
WITH per_turn AS (
    SELECT run_id, turn, bool_or(kind = 'initial' AND parse_ok) AS first_ok,
           count(*) FILTER (WHERE kind = 'repair') AS repairs
    FROM attempts WHERE list_contains(?::VARCHAR[], run_id) GROUP BY run_id, turn
)
SELECT r.provider, r.model, r.transport, count(*) AS turns,
       sum(t.repairs)::DOUBLE / count(*) AS repair_rate,
       (count(*) FILTER (WHERE t.first_ok))::DOUBLE / count(*) AS first_try_valid_rate
FROM per_turn t JOIN runs r USING (run_id)
GROUP BY ALL ORDER BY r.provider, r.model, r.transport
"""
_LATENCY_SQL = """
SELECT r.provider, r.model, r.transport, count(*) AS attempts,
       quantile_cont(a.latency_ms, 0.5) AS p50_ms, quantile_cont(a.latency_ms, 0.95) AS p95_ms
FROM attempts a JOIN runs r USING (run_id)
WHERE list_contains(?::VARCHAR[], a.run_id)
GROUP BY ALL ORDER BY r.provider, r.model, r.transport
"""
_TOOLS_SQL = """
SELECT tool, count(*) AS calls,
       quantile_cont(duration_ms, 0.5) AS p50_ms, quantile_cont(duration_ms, 0.95) AS p95_ms
FROM tool_calls WHERE list_contains(?::VARCHAR[], run_id)
GROUP BY tool ORDER BY tool
"""
_OPS_SQL = """
SELECT run_id, turn, seq, operation_id, kind, target, title, status, code, confidence,
       coalesce(detail, reason) AS why
FROM operations WHERE list_contains(?::VARCHAR[], run_id) ORDER BY run_id, turn, seq
"""
_CHANGES_SQL = """
SELECT run_id, path, field, old_value, new_value
FROM note_changes WHERE list_contains(?::VARCHAR[], run_id) ORDER BY run_id, seq
"""
_REPORTS_SQL = "SELECT run_id, markdown FROM reports WHERE list_contains(?::VARCHAR[], run_id)"


@dataclass
class ReportData:
    """Everything the page shows, read from the store in one place."""

    title: str
    store_path: str
    runs: list[dict[str, Any]]
    repair: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    operations: dict[str, list[dict[str, Any]]]
    diffs: dict[str, str]
    changes: dict[str, list[dict[str, Any]]]


def _records(store: Store, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    columns, rows = store.query(sql, params)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _select_runs(
    store: Store, run_id: str | None, batch_id: str | None, limit: int
) -> tuple[list[str], str]:
    if run_id:
        full = store.get_run(run_id)["run_id"]
        return [full], f"run {full}"
    if batch_id:
        _, rows = store.query(
            "SELECT run_id FROM runs WHERE batch_id = ? ORDER BY started_at", [batch_id]
        )
        if not rows:
            raise RunNotFound(f"no runs of batch {batch_id!r} in {store.path}")
        return [r[0] for r in rows], f"batch {batch_id} ({plural(len(rows), 'run')})"
    ids = store.run_ids(limit=limit)
    return ids, f"latest {plural(len(ids), 'run')}"


def collect_report(
    store: Store,
    *,
    run_id: str | None = None,
    batch_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> ReportData:
    """Read one run, one batch, or the newest ``limit`` runs for the page."""
    ids, scope = _select_runs(store, run_id, batch_id, limit)
    operations: dict[str, list[dict[str, Any]]] = {}
    for op in _records(store, _OPS_SQL, [ids]):
        operations.setdefault(op["run_id"], []).append(op)
    changes: dict[str, list[dict[str, Any]]] = {}
    for change in _records(store, _CHANGES_SQL, [ids]):
        changes.setdefault(change["run_id"], []).append(change)
    diffs = {}
    for row in _records(store, _REPORTS_SQL, [ids]):
        match = _DIFF.search(row["markdown"] or "")
        if match:
            diffs[row["run_id"]] = match.group(1)
    return ReportData(
        title=f"toolwire report: {scope}",
        store_path=str(store.path),
        runs=_records(store, _RUNS_SQL, [ids]),
        repair=_records(store, _REPAIR_SQL, [ids]),
        latency=_records(store, _LATENCY_SQL, [ids]),
        tools=_records(store, _TOOLS_SQL, [ids]),
        operations=operations,
        diffs=diffs,
        changes=changes,
    )


# -- rendering -------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _group_label(row: dict[str, Any]) -> str:
    # A replay model's name is a script path: its file name is what tells runs apart.
    model = str(row.get("model") or "")
    if row.get("provider") == "replay":
        model = Path(model).name
    return f"{row.get('provider')}:{model} / {row.get('transport')}"


def bar_chart(
    title: str,
    labels: list[str],
    series: list[tuple[str, list[float | None]]],
    *,
    unit: str = "",
    chart_id: str = "",
) -> str:
    """Horizontal grouped bars as inline SVG; one group per label, one bar per series."""
    width, label_w, bar_h, gap, top = 720, 250, 14, 10, 34
    plot_w = width - label_w - 90
    values = [v for _, vals in series for v in vals if v is not None]
    peak = max(values) if values and max(values) > 0 else 1.0
    group_h = bar_h * len(series) + gap
    height = top + max(len(labels), 1) * group_h + 28
    parts = [
        f'<svg class="chart" id="{_e(chart_id)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
        f'<text x="0" y="16" class="ct">{_e(title)}</text>',
    ]
    if not labels:
        parts.append(f'<text x="0" y="{top + 10}" class="cl">no data for these runs</text>')
    for i, label in enumerate(labels):
        y0 = top + i * group_h
        shown = label if len(label) <= 38 else "…" + label[-37:]
        parts.append(
            f'<text x="0" y="{y0 + bar_h * len(series) / 2 + 4}" class="cl">'
            f"<title>{_e(label)}</title>{_e(shown)}</text>"
        )
        for j, (name, vals) in enumerate(series):
            value = vals[i]
            bar_w = 0.0 if value is None else max(value / peak * plot_w, 1.0)
            y = y0 + j * bar_h
            color = _COLORS[j % len(_COLORS)]
            parts.append(
                f'<rect class="bar" x="{label_w}" y="{y}" width="{bar_w:.1f}" '
                f'height="{bar_h - 2}" fill="{color}"><title>{_e(name)}: '
                f"{_num(value)}{_e(unit)}</title></rect>"
                f'<text x="{label_w + bar_w + 4:.1f}" y="{y + bar_h - 4}" class="cv">'
                f"{_num(value)}{_e(unit)}</text>"
            )
    legend_y = height - 8
    for j, (name, _) in enumerate(series if labels else []):
        x = label_w + j * 140
        parts.append(
            f'<rect x="{x}" y="{legend_y - 9}" width="10" height="10" '
            f'fill="{_COLORS[j % len(_COLORS)]}"/>'
            f'<text x="{x + 14}" y="{legend_y}" class="cl">{_e(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(columns: list[str], rows: list[list[str]], css: str = "") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        css = ""
        if line.startswith(("+++", "---")):
            css = "dh"
        elif line.startswith("+"):
            css = "da"
        elif line.startswith("-"):
            css = "dd"
        elif line.startswith("@@"):
            css = "dh"
        lines.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _runs_table(runs: list[dict[str, Any]]) -> str:
    columns = ["started (UTC)", "run", "spec", "model", "transport", "status", "error"]
    columns += ["turns", "attempts", "repairs", "applied", "rejected", "deferred", "tokens in/out"]
    columns.append("seconds")
    rows = []
    for r in runs:
        started = r["started_at"].isoformat(sep=" ", timespec="seconds") if r["started_at"] else ""
        rows.append(
            [
                _e(started),
                f'<a href="#run-{_e(r["run_id"])}"><code>{_e(r["run_id"][:12])}</code></a>',
                f"{_e(r['spec_name'])} <code>{_e((r['spec_hash'] or '')[:12])}</code>",
                _e(_group_label(r).rsplit(" / ", 1)[0]),
                _e(r["transport"]),
                f'<span class="st-{_e(r["status"])}">{_e(r["status"])}</span>',
                _e(r["error_code"] or ""),
                _num(r["turns"]),
                _num(r["attempts"]),
                _num(r["repairs"]),
                _num(r["ops_applied"]),
                _num(r["ops_rejected"]),
                _num(r["ops_deferred"]),
                f"{_num(r['input_tokens'])}/{_num(r['output_tokens'])}",
                _num(r["duration_s"], 1),
            ]
        )
    return _table(columns, rows, "runs")


def _changes_html(changes: list[dict[str, Any]], ops: list[dict[str, Any]]) -> str:
    """What changed (old -> new per field) and what waits (deferred, with why)."""
    html_parts = []
    if changes:
        rows = [
            [_e(c["path"]), _e(c["field"]), _e(c["old_value"] or "—"), _e(c["new_value"] or "—")]
            for c in changes
        ]
        html_parts.append("<h3>What changed</h3>" + _table(["note", "field", "old", "new"], rows))
    deferred = [[_e(o["target"]), _e(o["why"] or "")] for o in ops if o["status"] == "deferred"]
    if deferred:
        html_parts.append("<h3>Deferred</h3>" + _table(["note", "why"], deferred))
    return "".join(html_parts)


def _operations_section(data: ReportData) -> str:
    parts = []
    columns = ["turn", "op", "kind", "target", "title", "status", "code", "conf", "why"]
    for r in data.runs:
        ops = data.operations.get(r["run_id"], [])
        diff = data.diffs.get(r["run_id"])
        rows = [
            [
                _num(o["turn"] + 1),
                _e(o["operation_id"]),
                _e(o["kind"]),
                _e(o["target"]),
                _e(o["title"]),
                f'<span class="st-{_e(o["status"])}">{_e(o["status"])}</span>',
                _e(o["code"] or ""),
                _num(o["confidence"]),
                _e(o["why"] or ""),
            ]
            for o in ops
        ]
        body = _changes_html(data.changes.get(r["run_id"], []), ops)
        body += _table(columns, rows, "ops") if rows else "<p>No operations.</p>"
        body += _diff_html(diff) if diff else "<p>No changes.</p>"
        parts.append(
            f'<details id="run-{_e(r["run_id"])}"><summary><code>{_e(r["run_id"])}</code> '
            f"{_e(_group_label(r))}: {_e(r['status'])}, {plural(len(ops), 'operation')}</summary>"
            f"{body}</details>"
        )
    return "".join(parts)


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.st-ok,.st-applied{color:#2a7a3b}.st-Failed,.st-rejected{color:#b03030;font-weight:bold}
.chart{display:block;margin:8px 0}.ct{font-weight:bold;font-size:14px}
.cl,.cv{font-size:12px}.diff{background:#fafafa;border:1px solid #ddd;padding:8px;
overflow-x:auto}.da{color:#1a7f37}.dd{color:#b03030}.dh{color:#555;font-weight:bold}
details{margin:6px 0}summary{cursor:pointer}
"""


def render_html(data: ReportData) -> str:
    """The page as one string; deterministic for the same data except the timestamp."""
    labels = [_group_label(r) for r in data.repair]
    repair_chart = bar_chart(
        "Repair rate and first-try validity by model / transport",
        labels,
        [
            ("repairs per turn", [r["repair_rate"] for r in data.repair]),
            ("first-try valid", [r["first_try_valid_rate"] for r in data.repair]),
        ],
        chart_id="chart-repair",
    )
    latency_chart = bar_chart(
        "Model latency by model / transport (ms per attempt)",
        [_group_label(r) for r in data.latency],
        [
            ("p50", [r["p50_ms"] for r in data.latency]),
            ("p95", [r["p95_ms"] for r in data.latency]),
        ],
        unit=" ms",
        chart_id="chart-latency",
    )
    tools_chart = bar_chart(
        "Tool call durations (ms)",
        [f"{t['tool']} ({t['calls']} calls)" for t in data.tools],
        [("p50", [t["p50_ms"] for t in data.tools]), ("p95", [t["p95_ms"] for t in data.tools])],
        unit=" ms",
        chart_id="chart-tools",
    )
    statuses = [r["status"] for r in data.runs]
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    summary = (
        f"{plural(len(data.runs), 'run')}: {statuses.count('ok')} ok, "
        f"{statuses.count('Failed')} Failed, "
        f"{statuses.count('running')} running. Store <code>{_e(data.store_path)}</code>, "
        f"generated {_e(generated)}."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(data.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(data.title)}</h1><p>{summary}</p>"
        f'<h2>Charts</h2><div class="charts">{repair_chart}{latency_chart}{tools_chart}</div>'
        f"<h2>Runs</h2>{_runs_table(data.runs)}"
        f"<h2>Operations and changes</h2>{_operations_section(data)}"
        "</body></html>\n"
    )


def write_html_report(
    store: Store,
    out: str | Path,
    *,
    run_id: str | None = None,
    batch_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Path:
    """Collect, render and write the page to ``out``; returns the path written."""
    path = Path(out)
    page = render_html(collect_report(store, run_id=run_id, batch_id=batch_id, limit=limit))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
