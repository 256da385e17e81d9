"""The machine, the versions, and the two outputs: ``RESULTS.md`` and ``results.json``."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.harness import Figure, Row

__all__ = [
    "format_met",
    "format_ratio",
    "format_value",
    "machine_info",
    "package_versions",
    "render_markdown",
    "write_results",
]

# Hand-run sections, appended to RESULTS.md as they are (see render_markdown).
SECTIONS = Path(__file__).parent / "sections"

PACKAGES = (
    "toolwire",
    "duckdb",
    "lxml",
    "prefect",
    "llama-cpp-python",
    "pyarrow",
    "pydantic",
    "PyYAML",
    "openai",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def machine_info() -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python and load: what a reader needs to compare numbers."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    ram = _ram_gib()
    return {
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gib": round(ram, 1) if ram else None,
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
        "env": {
            k: os.environ[k]
            for k in ("PYTHONDONTWRITEBYTECODE", "PREFECT_HOME", "TOOLWIRE_OPENAI_BASE_URL")
            if k in os.environ
        },
    }


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


# ------------------------------------------------------------------ markdown


def format_value(value: float | None, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if unit == "rows/s":
        return f"{value:,.0f} rows/s"
    if unit == "%":
        return f"{value:.1f} %"
    if unit in ("MB/s", "s/request", "s/note"):
        return f"{value:.2f} {unit}"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.3f} ms" if abs(value) < 1 else f"{value:.1f} ms"
    return f"{value:.4g} {unit}".strip()


def format_ratio(row: Row) -> str:
    if row.ratio is None:
        return "n/a" if row.baseline is not None or row.value is None else "—"
    label = row.ratio_label or "x"
    if label == "share":
        return f"{row.ratio * 100:.0f} %"
    if label.startswith("x"):
        return f"{row.ratio:.2f}{label}"
    return f"{row.ratio:.2f} {label}"


def format_met(row: Row) -> str:
    if row.target is None:
        return "—"
    if row.met is None:
        return "not measured"
    return "yes" if row.met else f"**no**: {row.miss}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _short(measure: str) -> str:
    """A row's name without its parenthesised details."""
    return measure.split(" (")[0].strip()


def _group_whys(rows: list[Row]) -> dict[str, list[str]]:
    """why text -> the (short) names of the rows it explains, in row order."""
    grouped: dict[str, list[str]] = {}
    for row in rows:
        if row.why:
            grouped.setdefault(row.why, []).append(_short(row.measure))
    return grouped


def _figure_md(fig: Figure) -> list[str]:
    out = [f"## {fig.number}. {fig.title}", ""]
    if fig.status != "measured":
        out += [f"Status: **{fig.status}**.", ""]
    if fig.method:
        out += [f"Method: {fig.method} ({fig.seconds:.0f} s for this figure.)", ""]
    if fig.rows:
        out += [
            "| measure | value | baseline | ratio | target | met? |",
            "|---|---|---|---|---|---|",
        ]
        for row in fig.rows:
            base = (
                f"{format_value(row.baseline, row.unit)} ({row.baseline_label})"
                if row.baseline is not None
                else (row.baseline_label or "—")
            )
            out.append(
                f"| {_cell(row.measure)} | {format_value(row.value, row.unit)} | {_cell(base)} | "
                f"{format_ratio(row)} | {_cell(row.target.text if row.target else '—')} | "
                f"{_cell(format_met(row))} |"
            )
        out.append("")
    whys = _group_whys(fig.rows)
    if whys:
        out.append("Why:")
        out += [f"- {', '.join(names)}: {why}." for why, names in whys.items()]
        out.append("")
    if fig.notes:
        out.append("Notes:")
        out += [f"- {note}" for note in fig.notes]
        out.append("")
    return out


def render_markdown(meta: dict[str, Any], figures: list[Figure]) -> str:
    machine, versions = meta["machine"], meta["versions"]
    lines = [
        "# toolwire benchmarks",
        "",
        f"Written by `{meta['command']}` on {meta['date']} ({meta['mode']} mode, "
        f"{meta['seconds'] / 60:.1f} min). Every figure is a ratio to a baseline measured in "
        "the same process on the same inputs, cases interleaved, medians of repeated "
        "batches. These are measurements, not tests: nothing here fails on a slow machine.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {machine['cpu']} |",
        f"| cores | {machine['logical_cores']} logical, {machine['usable_cores']} usable |",
        f"| RAM | {machine['ram_gib']} GiB |",
        f"| OS | {machine['os']} |",
        f"| Python | {machine['python']} |",
        f"| load average (1/5/15 min) at start | {machine['load_average_start']} |",
        f"| load average at end | {meta.get('load_average_end')} |",
        f"| toolwire commit | {machine['git_commit']}"
        + (" (uncommitted changes)" if machine["git_dirty"] else "")
        + " |",
        "",
        "## Versions",
        "",
        "| package | version |",
        "|---|---|",
    ]
    lines += [f"| {name} | {version} |" for name, version in versions.items()]
    if machine.get("env"):
        lines += ["", "Environment: " + ", ".join(f"`{k}={v}`" for k, v in machine["env"].items())]
    lines += ["", "## Summary", ""]
    lines += ["| # | figure | status | targets met | headline |", "|---|---|---|---|---|"]
    for fig in figures:
        targeted = [r for r in fig.rows if r.target is not None]
        met = sum(1 for r in targeted if r.met)
        headline = fig.extra.get("headline", "")
        lines.append(
            f"| {fig.number} | {fig.title} | {fig.status} | "
            f"{f'{met}/{len(targeted)}' if targeted else '—'} | {_cell(headline)} |"
        )
    lines += ["", "## Missed targets", ""]
    any_missed = False
    for fig in figures:
        if not fig.missed:
            continue
        any_missed = True
        misses = "; ".join(f"{_short(r.measure)}: {r.miss}" for r in fig.missed)
        lines.append(f"- Figure {fig.number} ({fig.title}): {misses}.")
        for why, names in _group_whys(fig.missed).items():
            lines.append(f"  - Why ({', '.join(names)}): {why}.")
    if not any_missed:
        lines.append("None among the figures measured.")
    lines.append("")
    for fig in figures:
        lines += _figure_md(fig)
    # Sections measured by scripts of their own (bench.agent_tasks: minutes of model time
    # per table), kept verbatim: regenerating the figures must not drop them.
    for section in sorted(SECTIONS.glob("*.md")):
        lines += [section.read_text(encoding="utf-8").rstrip("\n"), ""]
    lines += ["## Closing note: proposed fixes", ""]
    proposals = [(fig, p) for fig in figures for p in fig.proposals]
    if proposals:
        lines += [f"- Figure {fig.number}: {p}" for fig, p in proposals]
    else:
        lines.append("No target was missed; nothing to fix.")
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------- json


def _clean(value: Any) -> Any:
    """NaN/inf -> None, so the file is strict JSON."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_results(out_dir: Path, meta: dict[str, Any], figures: list[Figure]) -> tuple[Path, Path]:
    """Write RESULTS.md and results.json into ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "RESULTS.md"
    js = out_dir / "results.json"
    md.write_text(render_markdown(meta, figures), encoding="utf-8")
    payload = {**meta, "figures": [asdict(fig) for fig in figures]}
    js.write_text(
        json.dumps(_clean(payload), indent=2, ensure_ascii=False, default=str) + "\n",
        encoding="utf-8",
    )
    return md, js
