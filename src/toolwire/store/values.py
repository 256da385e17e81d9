"""Values as the store holds them: valid UTF-8 text, naive UTC timestamps, one-line errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from toolwire.errors import StoreError

__all__ = ["one_line", "storable_text", "to_timestamp", "utcnow"]


def storable_text(text: str | None) -> str | None:
    """``text`` as DuckDB can hold it: valid UTF-8.

    A provider's JSON decoder turns a ``"\\ud800"`` escape into a lone surrogate,
    which no UTF-8 column can hold; refusing the row would lose the attempt. Such
    characters are written as their ``\\udXXX`` escape instead (every other
    character is kept as is), so the raw text is still all there to read.
    """
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def one_line(exc: Exception) -> str:
    """DuckDB's message without its "LINE 1: ... ^" pointer lines, on one line."""
    lines = []
    for line in str(exc).splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines)


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def to_timestamp(value: Any, column: str) -> datetime | None:
    """Unix seconds or a datetime -> naive UTC datetime (the store's convention)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC).replace(tzinfo=None)
    raise StoreError(f"{column}: expected unix seconds or datetime, got {type(value).__name__}")
