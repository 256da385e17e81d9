"""Grammar literals as the served model's own tokens, for llama-cpp-python's server.

The in-process provider compiles every GBNF string literal to the model's
token ids (``gbnf.tokenize_literals``): under a grammar, greedy decoding then
continues from the tokens the model would have written itself. A server given
plain literals spells them its own way, and what follows changes: through
llama-cpp-python's server, SmolLM2-135M wrote ``Hello, World!`` for a task
asking for "hello world", the in-process model wrote ``hello world``; the
in-process model with plain literals wrote ``Hello, World!`` too
(bench/RESULTS.md, "Agent tasks"). llama-cpp-python's server tokenizes at
``/extras/tokenize``, beside ``/v1``; this asks it, once per literal.

Anything that goes wrong (no such route, a refused request, an odd answer)
turns the rewriting off for the provider, with one warning: the plain grammar
is what was sent before, and it works.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import httpx2

from toolwire.gbnf import tokenize_literals

__all__ = ["ServerTokens"]

_log = logging.getLogger(__name__)
CACHE_SIZE = 64  # grammars; the literals are cached without a bound (few, short)


class ServerTokens:
    """``grammar(gbnf)``: ``gbnf`` with token-id literals, or as given when the
    server cannot tokenize."""

    def __init__(self, base_url: str, *, timeout_s: float, http_client: Any = None) -> None:
        root = base_url.rstrip("/")
        self.url = (root[:-3] if root.endswith("/v1") else root) + "/extras/tokenize"
        self.timeout_s = timeout_s
        self._http = http_client
        self._literals: dict[str, list[int]] = {}
        self._grammars: OrderedDict[str, str] = OrderedDict()
        self._prefix: list[int] | None = None  # what the server adds to every text (BOS)
        self.working = True

    def grammar(self, gbnf: str) -> str:
        if not self.working:
            return gbnf
        cached = self._grammars.get(gbnf)
        if cached is not None:
            return cached
        try:
            if self._prefix is None:
                self._prefix = self._ask("")
            out = tokenize_literals(gbnf, self._tokenize)
        except (httpx2.HTTPError, ValueError, KeyError, TypeError) as exc:
            self.working = False
            _log.warning("note: %s cannot tokenize (%s); literals go as text", self.url, exc)
            return gbnf
        self._grammars[gbnf] = out
        if len(self._grammars) > CACHE_SIZE:
            self._grammars.popitem(last=False)
        return out

    def _tokenize(self, text: str) -> list[int]:
        ids = self._literals.get(text)
        if ids is None:
            ids = self._ask(text)
            prefix = self._prefix or []
            if ids[: len(prefix)] == prefix:
                ids = ids[len(prefix) :]
            self._literals[text] = ids
        return ids

    def _ask(self, text: str) -> list[int]:
        if self._http is None:
            self._http = httpx2.Client(timeout=self.timeout_s)
        response = self._http.post(self.url, json={"input": text})
        response.raise_for_status()
        tokens = response.json()["tokens"]
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ValueError("no token list in the answer")
        return tokens
