"""Deterministic repair of the small JSON defects models make in final reports.

Before spending a model call on a repair turn, three defects are fixed
mechanically, each only when the result is unambiguous:

- ``CODE_FENCE``: the JSON wrapped in a markdown code fence (```json ... ```);
- ``JSON_IN_PROSE``: one JSON object or array with prose before or after it
  (the span from the first ``{``/``[`` to the last ``}``/``]`` must decode);
- ``TRAILING_COMMA``: a comma before ``}`` or ``]`` (outside strings).

Nothing else is guessed: single quotes, comments, NaN, duplicate keys or a
missing brace still fail, and the model is asked to repair them. The caller
records which fixes were applied.
"""

from __future__ import annotations

import re
from typing import Any

from toolwire.protocols.text import fenced_span, loads_strict

__all__ = ["CODE_FENCE", "JSON_IN_PROSE", "TRAILING_COMMA", "repair_json"]

CODE_FENCE = "CODE_FENCE"
JSON_IN_PROSE = "JSON_IN_PROSE"
TRAILING_COMMA = "TRAILING_COMMA"

# A string literal (skipped whole) or a comma followed only by blanks and a closer.
_TRAILING_COMMA_RE = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=[ \t\r\n]*[}\]])', re.S)


def _drop_trailing_commas(text: str) -> str:
    return _TRAILING_COMMA_RE.sub(lambda m: m.group() if m.group() != "," else "", text)


def _decode(text: str) -> tuple[bool, Any]:
    try:
        return True, loads_strict(text)
    except (ValueError, RecursionError):
        return False, None


def repair_json(raw: str) -> tuple[Any, list[str]] | None:
    """The value ``raw`` was meant to hold and the fixes applied, or None if it cannot be
    repaired without guessing. Call it only after a strict decode failed."""
    fixes: list[str] = []
    text = raw.strip()
    span = fenced_span(text)
    if span is not None:
        text = text[span[0] : span[1]].strip()
        fixes.append(CODE_FENCE)
    if text[:1] not in ("{", "["):
        starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
        end = max(text.rfind("}"), text.rfind("]"))
        if not starts or end < min(starts):
            return None
        text = text[min(starts) : end + 1]
        fixes.append(JSON_IN_PROSE)
    ok, value = _decode(text)
    if not ok:
        fixed = _drop_trailing_commas(text)
        if fixed == text:
            return None
        ok, value = _decode(fixed)
        if not ok:
            return None
        fixes.append(TRAILING_COMMA)
    return (value, fixes) if fixes else None
