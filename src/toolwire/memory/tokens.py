"""Token counting and boundary-respecting truncation for prompt context.

Budgets are in tokens, not characters (seed 004: "implement token counting").
The model's own tokenizer is used when the provider exposes one; otherwise the
documented estimate ``ceil(utf8 bytes / 4)``, :func:`estimate_tokens` (cheap, and it
over-counts markup rather than under-counting it; the librarian's batching and the
agent's history count with it too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = [
    "TRUNCATION_MARK",
    "TokenCounter",
    "estimate_tokens",
    "token_counter",
    "truncate_to_tokens",
]

TokenCounter = Callable[[str], int]

# Appended where text was cut, so the model knows it sees part of it.
TRUNCATION_MARK = " [...]"

log = logging.getLogger(__name__)


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by the documented estimate: ceil(utf8 bytes / 4)."""
    return (len(text.encode("utf-8")) + 3) // 4


def token_counter(provider: Any = None) -> TokenCounter:
    """The provider's tokenizer when it has one, else ``estimate_tokens``.

    Looked up by duck typing, in order: a ``count_tokens(text) -> int`` method;
    a ``tokenize(text: str) -> list[int]`` method (``LlamaCppProvider``); a
    llama-cpp ``Llama`` at ``provider.llama`` (``Llama.tokenize(bytes)``). A
    tokenizer that fails on some text falls back to the estimate for that text.
    """
    count = getattr(provider, "count_tokens", None)
    if callable(count):
        return _guarded(count)
    tokenize = getattr(provider, "tokenize", None)
    if callable(tokenize):
        return _guarded(lambda text: len(tokenize(text)))
    llama_tokenize = getattr(getattr(provider, "llama", None), "tokenize", None)
    if callable(llama_tokenize):
        return _guarded(lambda text: len(llama_tokenize(text.encode("utf-8"), add_bos=False)))
    return estimate_tokens


def _guarded(count: Callable[[str], int]) -> TokenCounter:
    def guarded(text: str) -> int:
        try:
            return int(count(text))
        except Exception as exc:  # a tokenizer fault must not break prompt building
            log.warning("tokenizer failed (%s); using the byte estimate", exc)
            return estimate_tokens(text)

    return guarded


def truncate_to_tokens(
    text: str, max_tokens: int, count_tokens: TokenCounter = estimate_tokens
) -> str:
    """``text`` cut to at most ``max_tokens`` tokens at a line, else a word, boundary.

    Whole lines are kept while they fit; the first line that does not fit is cut
    after its last whole word that fits; ``TRUNCATION_MARK`` ends a cut text.
    When no whole word fits, the result is the bare mark ("[...]"), or "" when
    not even that fits. The result never exceeds the budget under ``count_tokens``.
    """
    if max_tokens <= 0 or not text:
        return ""
    if count_tokens(text) <= max_tokens:
        return text

    def fits(lines: list[str]) -> bool:
        return count_tokens("\n".join(lines) + TRUNCATION_MARK) <= max_tokens

    kept: list[str] = []
    for line in text.split("\n"):
        if fits([*kept, line]):
            kept.append(line)
            continue
        # Binary search for the most whole words of this line that fit. Tokenizers are
        # not strictly monotone on prefixes, so the final check below still guards.
        words = line.split(" ")
        lo, hi = 0, len(words) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits([*kept, " ".join(words[:mid])]):
                lo = mid
            else:
                hi = mid - 1
        partial = " ".join(words[:lo]).rstrip()
        if partial:
            kept.append(partial)
        break
    while kept and not fits(kept):
        kept.pop()
    while kept and not kept[-1].strip():
        kept.pop()  # no dangling blank line before the mark
    if not kept:
        return (
            TRUNCATION_MARK.strip() if count_tokens(TRUNCATION_MARK.strip()) <= max_tokens else ""
        )
    return "\n".join(kept) + TRUNCATION_MARK
