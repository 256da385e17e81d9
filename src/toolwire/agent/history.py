"""A bounded history: old tool results shortened in the context, kept whole in the store.

Every transport keeps its conversation as a list of messages that only grows:
each tool result stays in it for the rest of the run, so at a 4,096-token
window the fourth read of a 3.6 KB file no longer fits (issue 32). Seed 004
asks for bounded collections and compression; here the *request* is
compacted, never the adapter's history: before each model call, the oldest
long messages (tool results, XML-PAST, ``<results>``, long answers) are cut
to their first lines plus a note saying how much was left out and how to get
it again, oldest first, until the request fits its budget. The opening
messages (system prompt, task) and the latest answer with what followed it
are never cut. The
whole text of every result stays in the store (``tool_calls.result_text``).

The budget is the window minus the answer's ``max_tokens`` and the tool
definitions, with a margin: the estimate (UTF-8 bytes / 4) is not the model's
tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from toolwire.domain import Message
from toolwire.memory.tokens import estimate_tokens

__all__ = [
    "BUDGET_SHARE",
    "COMPACTED_NOTE",
    "Compacted",
    "compact_messages",
    "compacted_floor",
    "message_tokens",
]

KEEP_FIRST = 2  # system prompt and the task
HEAD_CHARS = 240  # what a compacted message keeps of its start
MIN_CUT_CHARS = 400  # messages shorter than this are left alone (nothing to gain)
BUDGET_SHARE = 0.85  # of what the window leaves, for the estimate's error
COMPACTED_NOTE = (
    "[... {cut} more characters left out to keep the conversation within the context "
    "window; the full text is stored with the run. Call the same tool again if you "
    "need it.]"
)


@dataclass(frozen=True)
class Compacted:
    messages: list[Message]
    count: int  # messages shortened in this request
    tokens: int  # estimated tokens of the messages after compaction


def message_tokens(message: Message) -> int:
    """Estimated tokens of one message (its content plus any tool calls it carries)."""
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    calls = message.get("tool_calls")
    if calls:
        text += json.dumps(calls, ensure_ascii=False, default=str)
    return estimate_tokens(text or "") + 4  # role and framing


def _shortened(message: Message) -> Message | None:
    content = message.get("content")
    if not isinstance(content, str) or len(content) < MIN_CUT_CHARS:
        return None
    head = content[:HEAD_CHARS]
    newline = head.rfind("\n")
    if newline > HEAD_CHARS // 2:  # cut at a line end when that keeps most of the head
        head = head[:newline]
    note = COMPACTED_NOTE.format(cut=len(content) - len(head))
    return {**message, "content": f"{head.rstrip()}\n{note}"}


def compact_messages(messages: Sequence[Message], budget_tokens: int) -> Compacted:
    """``messages`` with the oldest long ones shortened until they fit ``budget_tokens``.

    Returns the messages unchanged (``count == 0``) when they already fit; when
    even full compaction does not fit, returns the most compact version.
    """
    out = list(messages)
    sizes = [message_tokens(m) for m in out]
    total = sum(sizes)
    budget = int(budget_tokens * BUDGET_SHARE)
    count = 0
    # The latest answer and everything after it (its results, XML-NEXT) stay whole.
    last = max((i for i, m in enumerate(out) if m.get("role") == "assistant"), default=0)
    for i in range(KEEP_FIRST, last):
        if total <= budget:
            break
        short = _shortened(out[i])
        if short is None:
            continue
        size = message_tokens(short)
        total += size - sizes[i]
        out[i], sizes[i] = short, size
        count += 1
    return Compacted(out, count, total)


def compacted_floor(messages: Sequence[Message]) -> int:
    """Estimated tokens of ``messages`` once all but the opening ones are compacted.

    What the *next* request needs at least for this history: the tool output
    budget of a turn is the window minus this, not minus today's request.
    """
    head = sum(message_tokens(m) for m in messages[:KEEP_FIRST])
    rest = (_shortened(m) or m for m in messages[KEEP_FIRST:])
    return head + sum(message_tokens(m) for m in rest)
