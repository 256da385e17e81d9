"""Markdown pieces both jobs' reports print: a bounded table cell and the attempts table
(one row per model reply, whatever the job)."""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.domain import Attempt

__all__ = ["attempts_table", "cell"]


def cell(text: object, limit: int = 80) -> str:
    """One table cell: single line, pipes escaped, bounded length."""
    value = " ".join(str(text if text is not None else "").split()).replace("|", "\\|")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def attempts_table(attempts: Sequence[Attempt], parsed: str = "parsed") -> list[str]:
    """The ``## Attempts`` section; ``parsed`` names the column that says whether the
    reply could be used (the librarian parses an envelope, an agent's turn is usable)."""
    lines = [
        "",
        "## Attempts",
        "",
        f"| turn | attempt | kind | {parsed} | codes | tokens in/out | ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in attempts:
        codes = ", ".join(([a.error_code] if a.error_code else []) + list(a.error_codes))
        lines.append(
            f"| {a.turn + 1} | {a.attempt} | {a.kind} | {'yes' if a.parse_ok else 'no'} | "
            f"{cell(codes, 60)} | {a.input_tokens or 0}/{a.output_tokens or 0} | "
            f"{a.latency_ms:.0f} |"
        )
    return lines
