"""The JSON form of an ``<execute>`` block, ``[{"name": ..., "args": {...}}]``: follow
strings and depth to find the block's end (a ``</execute>`` inside a JSON string is
text), then decode the whole array. A step of ``scanner.Scanner``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from toolwire.protocols.execute.wire import (
    DONE,
    EMPTY,
    EXEC_CLOSE_RE,
    JSON_PLAIN_RE,
    JSON_SHAPE,
    JSON_STRING_RE,
)
from toolwire.protocols.text import lone_surrogate, reject_constant

if TYPE_CHECKING:
    from toolwire.protocols.execute.scanner import Scanner

__all__ = ["scan_json"]


def scan_json(self: Scanner) -> bool:
    """Follow strings and depth to the first ``</execute>`` outside a JSON string."""
    buf, n, jp = self.buf, len(self.buf), self.jpos
    while True:
        if self.in_string:
            m = JSON_STRING_RE.match(buf, jp)
            jp = m.end() if m is not None else jp
            if jp >= n or buf[jp] != '"':  # the string (or an escape) runs to the end
                return False
            self.in_string = False
            jp += 1
            continue
        m = JSON_PLAIN_RE.match(buf, jp)
        jp = m.end() if m is not None else jp
        if jp >= n:
            return False
        c = buf[jp]
        if c == '"':
            self.in_string = True
        elif c in "[{":
            self.depth += 1
        elif c in "]}":
            self.depth -= 1
        else:  # "<": the block ends at the first </execute> outside a JSON string
            close = EXEC_CLOSE_RE.match(buf, jp)
            if close is not None:
                _end_json(self, jp)
                self.pos = self.block_end = close.end()
                self.state = DONE
                return True
        jp += 1


def _end_json(self: Scanner, end: int) -> None:
    at = self.json_at
    try:
        value = json.loads(self.buf[at:end], parse_constant=reject_constant)
    except json.JSONDecodeError as err:
        raise self.fail(
            at + err.pos,
            "INVALID_JSON",
            f"The JSON in <execute> is invalid {{at}}: {err.msg}. " + JSON_SHAPE,
        ) from None
    except (ValueError, RecursionError) as err:
        raise self.fail(
            at,
            "INVALID_JSON",
            f"The JSON in <execute> {{at}} is invalid ({err}). " + JSON_SHAPE,
        ) from None
    if lone_surrogate(value, self.buf, at, end):
        raise self.fail(
            at, "INVALID_JSON", "The JSON in <execute> {at} escapes a lone surrogate (\\ud800)."
        )
    if not isinstance(value, list):
        raise self.fail(at, "JSON_NOT_ARRAY", "The JSON {at} is not an array. " + JSON_SHAPE)
    if not value:
        raise self.fail(self.exec_pos, "EMPTY_EXECUTE", "<execute> {at} " + EMPTY)
    self.json_items = value
