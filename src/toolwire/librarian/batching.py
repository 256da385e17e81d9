"""Split a workspace into librarian requests that fit the model's context window.

Token counts are an estimate (UTF-8 bytes / 4, rounded up): it is cheap,
needs no tokenizer, and over-counts markup-heavy text rather than
under-counting it, which is the safe direction for a budget. A note whose
body alone exceeds the budget is truncated at a line boundary and marked, so
the model knows it saw part of the note (and validation refuses rewrites of
it: a rewrite of half a note would drop the other half).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolwire.memory.tokens import estimate_tokens

__all__ = ["PlannedSource", "plan_batches", "TRUNCATION_MARK"]

TRUNCATION_MARK = "\n[... note truncated by toolwire: the rest is not shown ...]\n"

# Tags, ids and titles around each note's body in the request envelope.
PER_SOURCE_OVERHEAD_TOKENS = 40


@dataclass(frozen=True, slots=True)
class PlannedSource:
    note_id: str
    title: str
    body: str  # possibly truncated
    truncated: bool


def _truncate(body: str, max_tokens: int) -> tuple[str, bool]:
    if estimate_tokens(body) <= max_tokens:
        return body, False
    budget_bytes = max(0, max_tokens * 4 - len(TRUNCATION_MARK))
    cut = body.encode("utf-8")[:budget_bytes].decode("utf-8", errors="ignore")
    newline = cut.rfind("\n")
    if newline > len(cut) // 2:  # cut at a line boundary unless that loses too much
        cut = cut[: newline + 1]
    return cut.rstrip("\n") + TRUNCATION_MARK, True


def plan_batches(
    notes: Iterable[tuple[str, str, str]],
    *,
    batch_size: int,
    context_window_tokens: int,
    reserved_tokens: int,
) -> list[list[PlannedSource]]:
    """Group ``(note_id, title, body)`` into requests.

    A request holds at most ``batch_size`` notes and at most
    ``context_window_tokens - reserved_tokens`` estimated tokens, where the
    reserve covers the system prompt, the envelope and the answer.
    """
    budget = max(64, context_window_tokens - reserved_tokens)
    batches: list[list[PlannedSource]] = []
    current: list[PlannedSource] = []
    used = 0
    for note_id, title, body in notes:
        body, truncated = _truncate(body, budget - PER_SOURCE_OVERHEAD_TOKENS)
        cost = estimate_tokens(body) + estimate_tokens(title) + PER_SOURCE_OVERHEAD_TOKENS
        if current and (len(current) >= batch_size or used + cost > budget):
            batches.append(current)
            current, used = [], 0
        current.append(PlannedSource(note_id, title, body, truncated))
        used += cost
    if current:
        batches.append(current)
    return batches


def note_ids(batch: Sequence[PlannedSource]) -> list[str]:
    return [source.note_id for source in batch]
