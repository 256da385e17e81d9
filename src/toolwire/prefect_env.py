"""toolwire's Prefect defaults, set in the environment before Prefect is imported.

Prefect reads its settings once, at import, so every module that imports Prefect
(``flows``, ``batch``, ``schedule``, ``preflight``'s cron fallback) calls
:func:`configure_prefect_env` first. This module imports only ``os``: `spec
check` loads it, and must stay fast.
"""

from __future__ import annotations

import os

__all__ = ["configure_prefect_env"]


def configure_prefect_env() -> None:
    """Quiet, offline Prefect defaults; a user's own settings win (setdefault).

    Logs do go to the API (Prefect's default): a flow run's Logs tab shows
    toolwire's lines (``toolwire`` is one of Prefect's extra loggers).
    """
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "toolwire")
