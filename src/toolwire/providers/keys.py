"""Which endpoint may receive the API key: the one it was configured for, never over plain http.

Why. A spec is untrusted, and ``model.base_url`` is part of it: sending
``TOOLWIRE_OPENAI_API_KEY`` as a Bearer header to whatever host a spec names
hands the key to that host (issue #16 item 7). So a key is *bound* to the
base URL configured next to it, in the environment: ``TOOLWIRE_OPENAI_BASE_URL``
when set, else the official ``https://api.openai.com/v1``. A request to any
other origin (scheme, host, port) goes without the key (the placeholder
``sk-no-key`` local servers accept), and a key is never sent over plain http
to a host that is not loopback, whatever was configured.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

__all__ = ["OFFICIAL_BASE_URL", "bound_base_url", "is_loopback", "key_for", "same_origin"]

OFFICIAL_BASE_URL = "https://api.openai.com/v1"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port (paths may differ)."""
    first, second = _origin(a), _origin(b)
    return first is not None and first == second


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (localhost, 127.0.0.0/8, ::1)."""
    origin = _origin(url)
    if origin is None:
        return False
    host = origin[1].strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_base_url(settings: Any) -> str:
    """The base URL the configured key belongs to."""
    return getattr(settings, "openai_base_url", None) or OFFICIAL_BASE_URL


def key_for(base_url: str, settings: Any) -> tuple[str | None, str | None]:
    """(the key to send to ``base_url`` or None, why it is withheld or None).

    The reason is for the user (a 401 then explains itself); it never holds the key.
    """
    secret = getattr(settings, "openai_api_key", None)
    key = secret.get_secret_value() if secret is not None else None
    if not key:
        return None, None
    bound = bound_base_url(settings)
    if not same_origin(base_url, bound):
        return None, (
            f"the API key was not sent: it is bound to {bound} (TOOLWIRE_OPENAI_BASE_URL), "
            "not to this endpoint"
        )
    origin = _origin(base_url)
    if origin is not None and origin[0] == "http" and not is_loopback(base_url):
        return None, "the API key was not sent: plain http to a host that is not this machine"
    return key, None
