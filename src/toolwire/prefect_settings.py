"""Prefect's settings, read and written without importing Prefect (~2 s).

Two jobs, both before any Prefect import. :func:`configure_prefect_env` sets toolwire's
quiet, offline defaults in the environment: Prefect reads its settings once, at import,
so the ``flows`` package (and ``run.preflight``'s cron fallback) calls it first.
:func:`prefect_api_url` says whether a Prefect API is configured: `toolwire run` makes a
run a Prefect flow run when there is an API to show it in (``PREFECT_API_URL`` in the
environment, or in the active profile of Prefect's ``profiles.toml``: ``$PREFECT_HOME``,
default ``~/.prefect``; the profile named by ``PREFECT_PROFILE`` or the file's ``active``
key). Without one, Prefect would start a throwaway local server for the run (~25 s that
shows the user nothing), so the run goes without Prefect; ``--prefect`` asks for it anyway.
`spec check` loads this module, and must stay fast.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from toolwire.errors import ToolwireError

__all__ = ["configure_prefect_env", "prefect_api_url", "prefect_unavailable"]


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


def _profiles_file(env: Mapping[str, str]) -> Path:
    explicit = env.get("PREFECT_PROFILES_PATH")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("PREFECT_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".prefect") / "profiles.toml"


def prefect_api_url(env: Mapping[str, str] | None = None) -> str | None:
    """The configured Prefect API URL, or None (an unreadable profiles file counts as none:
    Prefect itself would then start its temporary server)."""
    env = os.environ if env is None else env
    if env.get("PREFECT_API_URL"):
        return env["PREFECT_API_URL"]
    try:
        data = tomllib.loads(_profiles_file(env).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    profiles = data.get("profiles")
    name = env.get("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    profile = profiles.get(name) if isinstance(profiles, dict) else None
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return url if isinstance(url, str) and url else None


def prefect_unavailable(exc: BaseException, *, fallback: str = "") -> ToolwireError | None:
    """``PREFECT_UNAVAILABLE`` in one line when ``exc`` is Prefect failing to start its
    temporary API server (slow under load), else None (not ours to translate).

    Prefect's message may carry the server's whole stdout and stderr: only its first
    sentence is kept. ``fallback`` names a way around Prefect (``--no-prefect``), if any.
    """
    text = str(exc)
    if not isinstance(exc, RuntimeError) or "Prefect API server" not in text:
        return None
    first = text.split(" stdout:")[0].split(" stderr:")[0].splitlines()[0].strip()
    remedy = "Retry, raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, or point "
    remedy += "PREFECT_API_URL at a running server" + (f"; or {fallback}" if fallback else "")
    return ToolwireError(f"Prefect could not start: {first} {remedy}", code="PREFECT_UNAVAILABLE")
