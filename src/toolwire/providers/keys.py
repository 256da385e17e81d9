"""Which endpoint may receive the API key: the one it was configured for, never over plain http.

Why. A spec is untrusted, and ``model.base_url`` is part of it: sending
``TOOLWIRE_OPENAI_API_KEY`` as a Bearer header to whatever host a spec names
hands the key to that host (issue #16 item 7). So a key is *bound* to the
base URL configured next to it, in the environment: ``TOOLWIRE_OPENAI_BASE_URL``
when set, else the official ``https://api.openai.com/v1``. A request to any
other origin (scheme, host, port) goes without the key (the placeholder
``sk-no-key`` local servers accept), and a key is never sent over plain http
to a host that is not loopback, whatever was configured.

And what a server says back never shows the key, whole or in part
(:func:`redact_key_echoes`, issue #30 item 9): servers echo a key masked
(``sk-abc...wxyz``, ``sk-****wxyz``, ``sk-a\u2026wxyz``), by its ends only
("the key ending in wxyz"), URL-encoded in a link, or base64-encoded (the
``Authorization`` header echoed back); and a completion that quotes the key is
redacted too (``openai_compat``: its text reaches the store and a cassette). A word of a message
that, read as is or decoded (percent-encoding, HTML entities, NFKC), holds 8
characters of the key in a row, its first 4 characters (or the first 4 after a
vendor prefix such as ``sk-proj-``) or its last 4, is replaced whole by ``***``,
whatever masks the rest of it. Every provider error passes through it before it
is raised, so the terminal, the report, the store and a ``--record`` cassette
only ever see the redacted text.
"""

from __future__ import annotations

import base64
import binascii
import html
import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from functools import partial
from typing import Any
from urllib.parse import unquote_plus, urlsplit

__all__ = [
    "OFFICIAL_BASE_URL",
    "bound_base_url",
    "is_loopback",
    "key_for",
    "redact_key_echoes",
    "same_origin",
    "shows_key",
]

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


# ---------------------------------------------------------------- what a server says back

# A word of a message, as far as a key or a masked echo of one can reach.
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>]+")
_WINDOW = 8  # any 8 characters of the key in a row give the word away
_END = 4  # so do its first or last 4 (what masked echoes keep)
_ENDS_FROM = 12  # ...for a key long enough that 4 characters of it are its own
# Vendor prefixes every key of a kind shares: the key's own head starts after them.
_VENDOR_PREFIX = re.compile(r"^(?:sk|pk|rk)[-_](?:proj|svcacct|admin|or-v1|ant-api\d+)?[-_]?")


def _readings(word: str) -> set[str]:
    """``word`` as written and decoded: percent-encoding (twice: double-encoded links),
    HTML entities, compatibility forms (fullwidth letters), base64 (a server echoing the
    ``Authorization`` header it got: base64 of ``Bearer <key>``, issue 45 item 19)."""
    forms = {word}
    text = word
    for _ in range(2):
        text = html.unescape(unquote_plus(text))
        forms.add(text)
    forms.add(unicodedata.normalize("NFKC", text))
    forms |= _base64_readings(word)
    return forms


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")


def _base64_readings(word: str) -> set[str]:
    """``word`` decoded as base64 (standard and URL-safe alphabets, padding optional) at
    each of the three alignments a key can sit at inside a longer encoded text."""
    found: set[str] = set()
    for m in _BASE64.finditer(word):
        blob = m.group(0).rstrip("=").replace("-", "+").replace("_", "/")
        for skip in range(4):  # a blob cut mid-group: try each start of a 4-char group
            part = blob[skip:]
            part = part[: len(part) - len(part) % 4] if len(part) % 4 == 1 else part
            try:
                raw = base64.b64decode(part + "=" * (-len(part) % 4), validate=True)
            except (ValueError, binascii.Error):
                continue
            found.add(raw.decode("utf-8", "replace"))
    return found


def _marks(secret: str) -> tuple[set[str], set[str]]:
    """(8-character windows of ``secret``, its 4-character ends) to look for in a word."""
    windows = {secret[i : i + _WINDOW] for i in range(len(secret) - _WINDOW + 1)}
    ends: set[str] = set()
    if len(secret) >= _ENDS_FROM:
        ends = {secret[:_END], secret[-_END:]}
        own = secret[len(_VENDOR_PREFIX.match(secret).group(0)) :]  # type: ignore[union-attr]
        if len(own) >= _ENDS_FROM:
            ends.add(own[:_END])
    return windows, ends


def shows_key(word: str, secret: str) -> bool:
    """Whether ``word`` shows any part of ``secret`` a reader could use (see module doc)."""
    if len(secret) < _END:
        return False
    windows, ends = _marks(secret)
    for form in _readings(word):
        if secret in form or any(w in form for w in windows) or any(e in form for e in ends):
            return True
    return False


def _mask_word(match: re.Match[str], *, secret: str) -> str:
    return "***" if shows_key(match.group(0), secret) else match.group(0)


def redact_key_echoes(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every key, and every word showing part of one, as ``***``."""
    for secret in secrets:
        if secret and len(secret) >= _END:  # never blank out single letters of a message
            text = text.replace(secret, "***")
            text = _WORD.sub(partial(_mask_word, secret=secret), text)
    return text
