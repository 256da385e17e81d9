"""Seed 001's session nonce and slot names: ``ai-agent-<8 hex>``, ``NONCE-0001``...,
``NONCE-FINAL`` and ``NONCE-PROGRESS``. A tag is honoured only under this run's nonce and
a slot offered this turn, so text copied from a note or an old turn cannot call a tool."""

from __future__ import annotations

import re
import secrets

from toolwire.errors import UsageError
from toolwire.protocols.text import THINK_OPEN, think_spans

__all__ = ["final_slot", "find_nonce", "new_nonce", "normalize_nonce", "progress_slot", "slot_ids"]

_NONCE_RE = re.compile(r"(?:ai-agent-)?([0-9a-f]{8})\Z")
_TAG_NONCE_RE = re.compile(r"<(ai-agent-[0-9a-f]{8})-")


def find_nonce(text: str) -> str | None:
    """The nonce of the first tag outside reasoning (``toolwire parse`` without ``--nonce``)."""
    spans = think_spans(text) if THINK_OPEN in text else []
    for m in _TAG_NONCE_RE.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            return m.group(1)
    return None


def new_nonce() -> str:
    """A per-run nonce ``ai-agent-<8 lowercase hex>``, fixed for every turn of the run."""
    return f"ai-agent-{secrets.token_hex(4)}"


def normalize_nonce(value: str) -> str:
    """``ai-agent-1a2b3c4d`` from itself or from ``1a2b3c4d`` (the CLI's ``--nonce``)."""
    m = _NONCE_RE.match(value)
    if m is None:
        raise UsageError(f"a nonce is ai-agent-<8 lowercase hex digits>, got {value!r}")
    return f"ai-agent-{m.group(1)}"


def slot_ids(nonce: str, start: int, count: int) -> list[str]:
    """Slots ``NONCE-0001``...: ``start`` is the 1-based number of the first one.

    Numbers run across turns: with 3 slots per turn, turn 1 gets 1-3 and turn 2
    ``slot_ids(nonce, 4, 3)``, so a slot copied from an old turn is undeclared.
    """
    if start < 1 or count < 0:
        raise ValueError(f"slot numbers start at 1 and count >= 0, got {start=}, {count=}")
    return [f"{nonce}-{n:04d}" for n in range(start, start + count)]


def final_slot(nonce: str) -> str:
    return f"{nonce}-FINAL"


def progress_slot(nonce: str) -> str:
    return f"{nonce}-PROGRESS"
