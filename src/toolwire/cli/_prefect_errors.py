"""A PREFECT_API_URL that names no reachable server, in one line (safety round four).

Prefect raises ``RuntimeError("Failed to reach API at URL")`` as a flow starts, before
any run began; `run` and `batch` printed its traceback.
"""

from __future__ import annotations

from toolwire.errors import ToolwireError

__all__ = ["api_unreachable"]


def api_unreachable(exc: BaseException, *, fallback: str = "") -> ToolwireError | None:
    """``PREFECT_UNAVAILABLE`` for Prefect's "Failed to reach API", else None."""
    text = str(exc)
    if not isinstance(exc, RuntimeError) or not text.startswith("Failed to reach API at"):
        return None
    remedy = "start that Prefect server or fix PREFECT_API_URL" + (
        f", or {fallback}" if fallback else ""
    )
    first = text.splitlines()[0].rstrip(".")
    return ToolwireError(f"{first}: {remedy}", code="PREFECT_UNAVAILABLE")
