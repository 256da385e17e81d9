"""Figure 1: parse + validate throughput of the wire parsers against a parsing floor.

``xml_attrless``: ``parse_response`` (tokenize, check structure, validate every
field, build the dataclasses) against ``lxml.etree.fromstring`` on the same
bytes, which only builds a tree and validates nothing: the C floor. Target:
toolwire >= 0.5x lxml's throughput. Two layouts: the canonical one (what the
grammar and the renderer produce) and the same response with the fields of
each operation in another order (models reorder fields; the seed fixes no
order). Both take the parser's fast path, which reads fields in any order;
what it cannot read (broken or unusual text) goes to the tag-stack path.

Slot (seed 001) and execute (seed 000) parsers against a bare substring scan
(a ``str.find`` loop that slices out every tag's content and checks nothing),
when their modules exist.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.harness import Figure, Row, Target, interleave

__all__ = ["run", "make_response", "substring_scan"]

TARGET = Target("ratio", ">=", 0.5, ">= 0.5x lxml")
# The issue: "Same for the xml slot and execute parsers vs a bare substring scan".
SCAN_TARGET = Target("ratio", ">=", 0.5, ">= 0.5x scan")
SIZES = (1, 10, 100)
_KINDS = ("retag_note", "retitle_note", "rewrite_note")


def make_response(n_ops: int, *, canonical: bool = True) -> bytes:
    """A valid response with ``n_ops`` operations of mixed kinds, some with entities."""
    from toolwire.domain import LibrarianResponse, Operation
    from toolwire.protocols.attrless import render_response

    ops = []
    for i in range(n_ops):
        kind = _KINDS[i % 3]
        body = {
            "retag_note": "databases\nobservability",
            "retitle_note": "-",
            "rewrite_note": (
                f"# Note {i}\n\nVACUUM reclaims space held by dead tuples; run it after "
                "bulk deletes.\n\n- check `pg_stat_user_tables`\n- tune autovacuum "
                "thresholds per table\n"
            ),
        }[kind]
        title = f"Postgres tuning & maintenance, part {i}" if i % 5 == 0 else f"Note {i} title"
        ops.append(
            Operation(
                f"op_{i + 1}",
                kind,
                f"tech/databases/note-{i:03d}",
                None,
                title,
                body,
                "The note is about database maintenance.",
                0.85,
            )
        )
    resp = LibrarianResponse("req_bench_001", "ok", "Tidy the database notes.", tuple(ops), ())
    text = render_response(resp)
    if not canonical:
        # Same content, <reason> moved after <confidence>: valid, in another field order
        # than the renderer's and the grammar's.
        lines = text.split("\n")
        out: list[str] = []
        held: str | None = None
        for line in lines:
            if line.startswith("<reason>"):
                held = line
                continue
            out.append(line)
            if line.startswith("<confidence>") and held is not None:
                out.append(held)
                held = None
        text = "\n".join(out)
    return text.encode("utf-8")


def substring_scan(text: str, open_prefix: str, close: str) -> list[str]:
    """The floor for tag scanners: slice out every ``open_prefix...>content close``."""
    found: list[str] = []
    pos = 0
    find = text.find
    while True:
        start = find(open_prefix, pos)
        if start < 0:
            return found
        gt = find(">", start)
        end = find(close, gt)
        if gt < 0 or end < 0:
            return found
        found.append(text[gt + 1 : end])
        pos = end + len(close)


def _attrless_rows(fig: Figure, repeats: int, batch_s: float) -> None:
    from lxml import etree

    from toolwire.protocols.attrless import parse_response

    timings: dict[str, Any] = {}
    for canonical in (True, False):
        layout = "canonical layout" if canonical else "fields reordered"
        for n in SIZES:
            data = make_response(n, canonical=canonical)
            parsed = parse_response(data)
            assert len(parsed.operations) == n, "bench input must parse"
            assert len(etree.fromstring(data)) == 5
            t = interleave(
                {
                    "toolwire": partial(parse_response, data),
                    "lxml": partial(etree.fromstring, data),
                },
                repeats=repeats,
                batch_s=batch_s,
            )
            mb = len(data) / 1e6
            ours, floor = mb / t["toolwire"].median_s, mb / t["lxml"].median_s
            timings[f"{n}/{canonical}"] = {
                "bytes": len(data),
                "toolwire_us": t["toolwire"].median_s * 1e6,
                "lxml_us": t["lxml"].median_s * 1e6,
                "spread_toolwire": t["toolwire"].spread,
                "spread_lxml": t["lxml"].spread,
            }
            fig.add(
                Row(
                    f"xml_attrless, {n} op{'s' if n > 1 else ''}, {layout} "
                    f"({len(data):,} B; {t['toolwire'].median_s * 1e6:.0f} vs "
                    f"{t['lxml'].median_s * 1e6:.0f} us/response)",
                    ours,
                    "MB/s",
                    baseline=floor,
                    baseline_label="lxml.etree.fromstring (no validation)",
                    ratio_label="x lxml",
                    target=TARGET,
                    why=(
                        "toolwire also validates every field, decodes entities and builds "
                        "frozen dataclasses; lxml only builds a C tree"
                    ),
                )
            )
    fig.extra["attrless"] = timings


def _optional(module: str, name: str) -> Callable[..., Any] | None:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _slot_rows(fig: Figure, repeats: int, batch_s: float) -> None:
    from bench.parsers_extra import execute_cases, slot_cases

    whys = {
        "slots": "the parser reads the tags in one C pass (_speedups.read_slot_tags: nonce, "
        "slot and attributes read, colons outside strings counted), checks slots, tools and "
        "statuses by set, decodes every call's JSON arguments with orjson (repeated keys, NaN, "
        "lone surrogates and integers beyond 64 bits refused or routed to the exact decoder) "
        "and builds a frozen ToolCall per call; the scan only slices",
        "execute": "the parser reads the block with one regex match and the arguments with "
        "one findall, converts each value to its schema type and checks every call before "
        "any runs; the scan only slices",
    }
    for key, label, module, name, make_cases in (
        ("slots", "xml slots", "toolwire.protocols.slots", "parse_slots", slot_cases),
        (
            "execute",
            "execute blocks",
            "toolwire.protocols.execute",
            "parse_execute",
            execute_cases,
        ),
    ):
        parser = _optional(module, name)
        if parser is None:
            fig.add(Row(f"{label}: {module}.{name}", None, "MB/s", target=None))
            fig.notes.append(f"{label}: `{module}.{name}` does not exist yet: not measured.")
            fig.status = "partial"
            continue
        try:
            cases = make_cases(parser)
        except Exception as exc:  # a parser whose API changed must not sink the figure
            fig.add(Row(f"{label}: {module}.{name}", None, "MB/s"))
            fig.notes.append(f"{label}: could not build inputs ({type(exc).__name__}: {exc}).")
            fig.status = "partial"
            continue
        for case in cases:
            t = interleave(
                {"toolwire": case.parse, "scan": case.scan}, repeats=repeats, batch_s=batch_s
            )
            mb = case.size / 1e6
            fig.add(
                Row(
                    f"{label}, {case.label} ({case.size:,} B; "
                    f"{t['toolwire'].median_s * 1e6:.0f} vs {t['scan'].median_s * 1e6:.0f} "
                    "us/text)",
                    mb / t["toolwire"].median_s,
                    "MB/s",
                    baseline=mb / t["scan"].median_s,
                    baseline_label="str.find loop over the tags (no validation)",
                    ratio_label="x substring scan",
                    target=SCAN_TARGET,
                    why=whys[key],
                )
            )


def run(fig: Figure, *, quick: bool) -> None:
    repeats, batch_s = (5, 0.05) if quick else (15, 0.2)
    fig.method = (
        f"Per size, toolwire and the baseline run in alternating batches of ~{batch_s * 1000:.0f}"
        f" ms, {repeats} batches each; the value is the median batch's throughput "
        "(bytes / per-call time). Inputs are parsed once before timing and must be valid. "
        "xml slots = seed 001's parse_slots (mode xml); execute blocks = seed 000's "
        "parse_execute (element form, three tools with JSON-Schema arguments)."
    )
    built = _optional("toolwire.protocols._speedups", "read_slot_tags") is not None
    fig.extra["c_speedups"] = built
    fig.method += " The C speedups (toolwire.protocols._speedups) were " + (
        "built: slots read with the C pass, results built by its Maker."
        if built
        else "not built: the pure-Python paths ran."
    )
    _attrless_rows(fig, repeats, batch_s)
    _slot_rows(fig, repeats, batch_s)
    ratios = {
        layout: [r.ratio for r in fig.rows if layout in r.measure and r.ratio is not None]
        for layout in ("canonical layout", "fields reordered")
    }
    if all(ratios.values()):
        fig.extra["headline"] = (
            f"xml_attrless {min(ratios['canonical layout']):.2f}-"
            f"{max(ratios['canonical layout']):.2f}x lxml (canonical), "
            f"{min(ratios['fields reordered']):.2f}-"
            f"{max(ratios['fields reordered']):.2f}x (reordered fields)"
        )
        for label in ("xml slots", "execute blocks"):
            scan = [r.ratio for r in fig.rows if r.measure.startswith(label) and r.ratio]
            if scan:
                fig.extra["headline"] += f"; {label} {min(scan):.2f}-{max(scan):.2f}x scan"
    missed = [row.measure for row in fig.missed]
    if any(m.startswith("xml slots") for m in missed):
        fig.proposals.append(
            "Slot parser below 0.5x a substring scan. Check that the C speedups were built "
            "(`python -c 'import toolwire.protocols._speedups'`): without them the regex "
            "path runs, which measured 0.38-0.45x. With them, per call: the C read ~0.25 us, "
            "orjson's decode ~0.19 us, the ToolCall ~0.07 us, against the scan's ~0.48 us."
        )
    if any(m.startswith("execute") for m in missed):
        fig.proposals.append(
            "Execute parser below 0.5x a substring scan: parse_execute gets the whole text yet "
            "runs the chunk-by-chunk streaming scanner; add a whole-text fast path (one "
            "compiled pattern per block, as the xml_attrless canonical path does) and keep "
            "the streaming scanner for streams and for the error report."
        )
    if any(m.startswith("xml_attrless") for m in missed):
        fig.proposals.append(
            "xml_attrless below 0.5x lxml: the fast path is one regex split plus column-wise "
            "checks; for a single operation the fixed cost (character check, head, warnings, "
            "result objects) dominates: fold more of it into the split's pattern."
        )
