"""Escaping, number formatting and the inline-SVG bar chart of the report.

A chart has one axis and one unit: every series on it is measured the same way
(two rates in percent, two latencies in ms, three counts of calls). A count and
a rate never share a chart.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

__all__ = ["COLORS", "bar_chart", "esc", "num", "pct"]

COLORS = ("#3b6fb6", "#e08a2e", "#4a9a5b", "#b64a4a")


def esc(value: Any) -> str:
    """Any value as escaped HTML text (None as empty)."""
    return html.escape("" if value is None else str(value), quote=True)


def num(value: Any, digits: int = 2) -> str:
    """A number for a cell: ``-`` for none, floats with ``digits`` decimals."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None) -> str:
    """A rate in [0, 1] as a percentage, ``-`` when there is none."""
    return "-" if value is None else f"{value * 100:.0f}%"


def bar_chart(
    title: str,
    labels: list[str],
    series: list[tuple[str, list[float | None]]],
    *,
    chart_id: str,
    axis: str,
    fmt: Callable[[float | None], str] = num,
    scale_max: float | None = None,
) -> str:
    """Horizontal grouped bars as inline SVG; one group per label, one bar per series.

    ``axis`` names the one unit every bar is measured in; ``scale_max`` fixes the
    axis end (1.0 for rates), else it is the largest value.
    """
    width, label_w, bar_h, gap, top = 720, 250, 14, 10, 34
    plot_w = width - label_w - 90
    values = [v for _, vals in series for v in vals if v is not None]
    peak = scale_max or (max(values) if values and max(values) > 0 else 1.0)
    group_h = bar_h * len(series) + gap
    plot_bottom = top + max(len(labels), 1) * group_h
    height = plot_bottom + 44
    parts = [
        f'<svg class="chart" id="{esc(chart_id)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">',
        f"<title>{esc(title)}</title>",
        f'<text x="0" y="16" class="ct">{esc(title)}</text>',
    ]
    if not labels:
        parts.append(f'<text x="0" y="{top + 10}" class="cl">no data for these runs</text>')
    for i, label in enumerate(labels):
        y0 = top + i * group_h
        shown = label if len(label) <= 38 else "…" + label[-37:]
        parts.append(
            f'<text x="0" y="{y0 + bar_h * len(series) / 2 + 4}" class="cl">'
            f"<title>{esc(label)}</title>{esc(shown)}</text>"
        )
        for j, (name, vals) in enumerate(series):
            value = vals[i]
            bar_w = 0.0 if value is None else max(min(value / peak, 1.0) * plot_w, 1.0)
            y = y0 + j * bar_h
            parts.append(
                f'<rect class="bar" x="{label_w}" y="{y}" width="{bar_w:.1f}" '
                f'height="{bar_h - 2}" fill="{COLORS[j % len(COLORS)]}"><title>{esc(name)}: '
                f"{esc(fmt(value))}</title></rect>"
                f'<text x="{label_w + bar_w + 4:.1f}" y="{y + bar_h - 4}" class="cv">'
                f"{esc(fmt(value))}</text>"
            )
    if labels:  # the axis: its line, its two ends and its unit
        parts.append(
            f'<line class="axis" x1="{label_w}" y1="{top - 4}" x2="{label_w}" '
            f'y2="{plot_bottom}"/><line class="axis" x1="{label_w}" y1="{plot_bottom}" '
            f'x2="{label_w + plot_w}" y2="{plot_bottom}"/>'
            f'<text x="{label_w}" y="{plot_bottom + 13}" class="ax">{esc(fmt(0.0))}</text>'
            f'<text x="{label_w + plot_w}" y="{plot_bottom + 13}" class="ax" '
            f'text-anchor="end">{esc(fmt(peak))}</text>'
            f'<text x="{label_w + plot_w / 2}" y="{plot_bottom + 13}" class="ax" '
            f'text-anchor="middle">{esc(axis)}</text>'
        )
    legend_y = height - 6
    for j, (name, _) in enumerate(series if labels else []):
        x = label_w + j * 150
        parts.append(
            f'<rect x="{x}" y="{legend_y - 9}" width="10" height="10" '
            f'fill="{COLORS[j % len(COLORS)]}"/>'
            f'<text x="{x + 14}" y="{legend_y}" class="cl">{esc(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
