"""The page: summary, model x transport comparison, charts, run table, runs in detail."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolwire.htmlreport.calls import group_label, run_section, table
from toolwire.htmlreport.changed import what_changed
from toolwire.htmlreport.data import DEFAULT_LIMIT, ReportData, collect_report, plural, run_state
from toolwire.htmlreport.svg import bar_chart, esc, num, pct

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = ["render_html", "write_html_report"]


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _per_turn(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _share(part: int, whole: int, rate: float | None) -> str:
    return f"{pct(rate)} ({part}/{whole})" if whole else "-"


def compare_table(rows: list[dict[str, Any]]) -> str:
    """Per provider/model/transport: pass/fail, validity, repairs, latency, tokens."""
    columns = ["model / transport", "runs", "ok", "Failed", "pass rate", "turns"]
    columns += ["first-try valid", "repairs", "repairs per turn", "p50 ms / request"]
    columns += ["p95 ms / request", "tokens in/out", "median run s"]
    body = []
    for r in rows:
        failed = f'<span class="st-Failed">{r["failed"]}</span>' if r["failed"] else "0"
        body.append(
            [
                esc(group_label(r)),
                num(r["runs"]) + (f" ({r['running']} running)" if r["running"] else ""),
                num(r["ok"]),
                failed,
                _share(r["ok"], r["ok"] + r["failed"], r["pass_rate"]),
                num(r["turns"]),
                _share(r["first_try_valid"], r["turns"], r["first_try_rate"]),
                num(r["repairs"]),
                _per_turn(r["repairs_per_turn"]),
                num(r["p50_ms"], 0),
                num(r["p95_ms"], 0),
                f"{num(r['input_tokens'])}/{num(r['output_tokens'])}",
                num(r["median_run_s"], 1),
            ]
        )
    return table(columns, body, "compare")


def charts(data: ReportData) -> str:
    """Up to five charts, each with one unit on its axis: the model's only when the runs
    asked a model, the tools' only when they called tools (a run that called neither
    showed "0 ms" latency and empty tool charts)."""
    groups = [group_label(r) for r in data.compare]
    timed = [t for t in data.tools if t["p50_ms"] is not None]
    asked_model = any(r["turns"] for r in data.compare)
    shown = [
        bar_chart(
            "Pass rate (runs ok) and first-try validity (turns)",
            groups,
            [("runs ok", [r["pass_rate"] for r in data.compare])]
            + (
                [("turns valid on the first try", [r["first_try_rate"] for r in data.compare])]
                if asked_model
                else []
            ),
            chart_id="chart-pass",
            axis="percent",
            fmt=pct,
            scale_max=1.0,
        ),
    ]
    if asked_model:
        shown += [
            bar_chart(
                "Repairs per turn",
                groups,
                [("repair requests per turn", [r["repairs_per_turn"] for r in data.compare])],
                chart_id="chart-repairs",
                axis="repair requests per turn",
                fmt=_per_turn,
            ),
            bar_chart(
                "Model latency per request",
                groups,
                [
                    ("p50", [r["p50_ms"] for r in data.compare]),
                    ("p95", [r["p95_ms"] for r in data.compare]),
                ],
                chart_id="chart-latency",
                axis="ms per request",
                fmt=_ms,
            ),
        ]
    if data.tools:
        shown.append(
            bar_chart(
                "Tool calls by outcome",
                [str(t["tool"]) for t in data.tools],
                [
                    ("ran ok", [t["ok"] for t in data.tools]),
                    ("tool failed", [t["failed"] for t in data.tools]),
                    ("refused (never ran)", [t["refused"] for t in data.tools]),
                ],
                chart_id="chart-tool-calls",
                axis="calls",
                fmt=_count,
            )
        )
    if timed:
        shown.append(
            bar_chart(
                "Tool call durations (calls that ran)",
                [str(t["tool"]) for t in timed],
                [("p50", [t["p50_ms"] for t in timed]), ("p95", [t["p95_ms"] for t in timed])],
                chart_id="chart-tools",
                axis="ms per call",
                fmt=_ms,
            )
        )
    return "".join(shown)


def _runs_table(runs: list[dict[str, Any]]) -> str:
    columns = ["started (UTC)", "run", "spec", "model", "transport", "status", "error"]
    columns += ["turns", "requests", "repairs", "tool calls", "ops applied / rejected / deferred"]
    columns += ["tokens in/out", "seconds"]
    rows = []
    for r in runs:
        started = r["started_at"].isoformat(sep=" ", timespec="seconds") if r["started_at"] else ""
        rows.append(
            [
                f'<span class="nw">{esc(started)}</span>',
                f'<a href="#run-{esc(r["run_id"])}"><code>{esc(r["run_id"][:12])}</code></a>',
                f"{esc(r['spec_name'])} <code>{esc((r['spec_hash'] or '')[:12])}</code>",
                esc(group_label(r).rsplit(" / ", 1)[0]),
                esc(r["transport"]),
                f'<span class="st-{esc(r["status"])}">{esc(run_state(r))}</span>',
                esc(r["error_code"] or "").replace("_", "_<wbr>"),
                num(r["turns"]),
                num(r["attempts"]),
                num(r["repairs"]),
                num(r["tool_calls"]),
                "-"
                if r["job"] == "agent"
                else f"{r['ops_applied']}/{r['ops_rejected']}/{r['ops_deferred']}",
                f"{num(r['input_tokens'])}/{num(r['output_tokens'])}",
                num(r["duration_s"], 1),
            ]
        )
    return table(columns, rows, "runs")


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}h3{font-size:14px;margin:14px 0 4px}
h4{font-size:13px;margin:8px 0 2px;color:#444}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.st-ok,.st-applied,.st-success{color:#2a7a3b}.st-undone{color:#9a5a00}
.st-Failed,.st-rejected,.st-failure,.st-invalid{color:#b03030;font-weight:bold}
.chart{display:block;margin:8px 0}.ct{font-weight:bold;font-size:14px}
.cl,.cv{font-size:12px}.ax{font-size:11px;fill:#555}.axis{stroke:#999;stroke-width:1}
.diff,.txt{background:#fafafa;border:1px solid #ddd;padding:6px;margin:2px 0;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:24em;overflow:auto;font-size:12px}
.da{color:#1a7f37}.dd{color:#b03030}.dh{color:#555;font-weight:bold}
.final{background:#f1f8f2}.raw{background:#f6f6fb}
table.calls td{max-width:420px}table.calls .txt{max-height:12em}
.msg{border-left:3px solid #ccd;padding-left:8px;margin:4px 0}.role{font-weight:bold;font-size:12px}
.none{color:#666;font-style:italic}.nw{white-space:nowrap}.wide{overflow-x:auto}
details{margin:6px 0}summary{cursor:pointer}details.run{border-top:1px solid #ddd;padding-top:4px}
details.attempt{margin-left:16px}details.attempt.repair>summary{color:#9a5a00}
details.attempt.bad>summary{color:#b03030}
"""


def render_html(data: ReportData) -> str:
    """The page as one string; deterministic for the same data except the timestamp."""
    # Every state the store holds, counted (ok, Failed, running, and whatever a job
    # records), not three fixed words.
    states = Counter(run_state(r) for r in data.runs)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    counted = ", ".join(f"{n} {esc(state)}" for state, n in sorted(states.items()))
    summary = (
        f"{plural(len(data.runs), 'run')}: {counted or 'none'}. "
        f"Store <code>{esc(data.store_path)}</code>, generated {esc(generated)}."
    )
    details = "".join(run_section(data, r) for r in data.runs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(data.title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{esc(data.title)}</h1><p>{summary}</p>"
        f'<h2 id="what-changed">What changed</h2>{what_changed(data)}'
        f'<h2>Model × transport</h2><div class="wide">{compare_table(data.compare)}</div>'
        f'<h2>Charts</h2><div class="charts">{charts(data)}</div>'
        f'<h2>Runs</h2><div class="wide">{_runs_table(data.runs)}</div>'
        "<h2>Runs in detail</h2><p>Open a run for its requests (prompt, raw output, tokens, "
        f"latency), its tool calls with arguments and results, or its operations.</p>{details}"
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
