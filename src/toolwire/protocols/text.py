"""What every wire scanner needs of a model's text: bounds, positions, located errors, every
problem at once, the guard that keeps a bug of ours a protocol error, strict JSON, the lone
surrogate test, XML text escapes, code fences and ``<think>`` blocks.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from toolwire.errors import ProtocolError

__all__ = [
    "MAX_INPUT_BYTES",
    "THINK_CLOSE",
    "THINK_OPEN",
    "escape_text",
    "fenced_span",
    "guarded",
    "ILLEGAL_RE",
    "Lines",
    "Problems",
    "line_column",
    "located_error",
    "loads_strict",
    "lone_surrogate",
    "reject_constant",
    "reply_text",
    "skip_blanks",
    "strip_span",
    "text_has_lone_surrogate",
    "think_spans",
    "unescape_text",
]

# Bounds on work for untrusted input (brief: 8 MB).
MAX_INPUT_BYTES = 8 * 1024 * 1024
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# ```json, ```xml, ``` ... : the opening fence line (info string, trailing blanks, newline).
_FENCE_OPEN_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n")
_WS = " \t\r\n"
_BLANKS_RE = re.compile(r"[ \t\r\n]*+")


def line_column(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of ``text[pos]``."""
    return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)


class Lines:
    """Line and column of many positions in one text. ``line_column`` per position would
    make a reply of many bad tags or leaked calls quadratic; this counts each newline once
    going forward, and a step back counts only the newlines it steps over."""

    __slots__ = ("text", "pos", "line", "line_start")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.line_start = 0  # index of the first character of the current line

    def at(self, pos: int) -> tuple[int, int]:
        text = self.text
        if pos >= self.pos:
            count = text.count("\n", self.pos, pos)
            if count:
                self.line += count
                self.line_start = text.rfind("\n", self.pos, pos) + 1
        else:
            count = text.count("\n", pos, self.pos)
            if count:
                self.line -= count
                self.line_start = text.rfind("\n", 0, pos) + 1
        self.pos = pos
        return self.line, pos - self.line_start + 1


def located_error(code: str, src: str, pos: int | None, detail: str, message: str) -> ProtocolError:
    """An error at ``src[pos]``: ``{at}`` in ``message`` becomes "at line L, column C"."""
    if pos is None:
        return ProtocolError(code, message, details=[detail])
    line, col = line_column(src, pos)
    text = message.replace("{at}", f"at line {line}, column {col}")
    return ProtocolError(code, text, line, col, [detail])


class Problems:
    """Every problem a parser's checks find (a detail code and a line for the model, the
    first one's position), raised as one error: the model fixes them all in one turn.

    The first ``MAX_LISTED`` are listed, the rest counted: a hostile reply of 300,000 empty
    operations made 2 million lines (846 MB) that no model could read back anyway."""

    MAX_LISTED = 100

    def __init__(self) -> None:
        self.details: list[str] = []
        self.lines: list[str] = []
        self.first = -1  # position of the first problem that has one
        self.more = 0  # problems past MAX_LISTED, counted only
        self._listed: set[str] = set()

    def add(self, detail: str, line: str, pos: int = -1, *, once: bool = False) -> None:
        """Add a problem; with ``once``, a detail already listed is not listed again."""
        if self.first < 0:
            self.first = pos
        if once and detail in self._listed:
            return
        if len(self.details) < self.MAX_LISTED:
            self._listed.add(detail)
            self.details.append(detail)
            self.lines.append(line)
        else:
            self.more += 1

    def raise_any(self, code: str, src: str = "", lead: str = "") -> None:
        """Raise ``code`` with every problem, located at the first problem's position."""
        if self.details:
            line, col = line_column(src, self.first) if self.first >= 0 else (None, None)
            lines, details = self.lines, self.details
            if self.more:
                lines = [*lines, f"... and {self.more} more problems of the same kinds."]
                details = [*details, f"MORE_PROBLEMS:{self.more}"]
            raise ProtocolError(code, lead + "\n".join(lines), line, col, details)


def reply_text(text: str | bytes, code: str) -> str:
    """The reply as a str within the size bound; anything else is refused with ``code``.

    Bytes must be UTF-8. The bound is on UTF-8 bytes; the text is encoded only when
    its characters alone do not decide (4 bytes at most each).
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            message = f"The text is not valid UTF-8 (byte {exc.start}): send UTF-8 text."
            raise ProtocolError(code, message, details=["INVALID_ENCODING"]) from None
    if not isinstance(text, str):
        message = f"Expected text, got {type(text).__name__}."
        raise ProtocolError(code, message, details=["NOT_TEXT"])
    size = len(text)
    if size * 4 > MAX_INPUT_BYTES:
        size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_INPUT_BYTES:
        raise ProtocolError(
            code,
            f"The reply is {size} bytes; the limit is {MAX_INPUT_BYTES} bytes: write a shorter "
            "reply.",
            details=["RESPONSE_TOO_LARGE"],
        )
    return text


_P = ParamSpec("_P")
_R = TypeVar("_R")


def guarded(code: str, fix: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Let only ``ProtocolError`` out of a parser, whatever the text: a bug of ours still
    reaches the engine as a protocol failure it can record (``PARSER_ERROR:<type>``)."""

    def wrap(parse: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(parse)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return parse(*args, **kwargs)
            except ProtocolError:
                raise
            except Exception as exc:
                name = type(exc).__name__
                message = f"The parser failed on this reply ({name}); {fix}."
                raise ProtocolError(code, message, details=[f"PARSER_ERROR:{name}"]) from exc

        return run

    return wrap


def reject_constant(name: str) -> Any:
    """``parse_constant`` hook: NaN and Infinity are not JSON (RFC 8259), json accepts them."""
    raise ValueError(f"{name} is not a JSON value")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


# Built once: json.loads with hooks would build a decoder (and its C scanner) per call.
_STRICT = json.JSONDecoder(parse_constant=reject_constant, object_pairs_hook=_unique_pairs)


def loads_strict(text: str) -> Any:
    """``json.loads`` minus what JSON forbids or leaves ambiguous (NaN, duplicate keys).

    Raises ``json.JSONDecodeError`` (with a position), ``ValueError`` or
    ``RecursionError`` (nesting deeper than the C scanner allows).
    """
    return _STRICT.decode(text)


def lone_surrogate(value: Any, raw: str, lo: int = 0, hi: int | None = None) -> bool:
    """Does a value decoded from ``raw[lo:hi]`` hold a lone surrogate (from ``\\ud800``)?

    Such a string cannot be encoded as UTF-8: a tool, the store or the next
    prompt would fail on it later, so parsers refuse it at once.
    """
    hi = len(raw) if hi is None else hi
    # The common case: no escape and no non-ASCII character, so nothing could make one.
    if raw.find("\\", lo, hi) < 0 and (raw.isascii() or raw[lo:hi].isascii()):
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_has_lone_surrogate(text: str) -> bool:
    """A str (not JSON) holding a lone surrogate, as a provider's JSON decoder can hand us."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate cannot be encoded
        return True
    return False


def skip_blanks(text: str, pos: int = 0, hi: int | None = None) -> int:
    """The index of the first character at or after ``pos`` that is not a blank."""
    m = _BLANKS_RE.match(text, pos, len(text) if hi is None else hi)
    return m.end() if m is not None else pos


def strip_span(text: str, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """``text[lo:hi]`` without the blanks around it, as a span (empty if all blank)."""
    hi = len(text) if hi is None else hi
    lo = skip_blanks(text, lo, hi)
    while hi > lo and text[hi - 1] in _WS:
        hi -= 1
    return lo, hi


def fenced_span(text: str, lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """The inside of a markdown code fence filling ``text[lo:hi]`` (blanks around allowed).

    Returns the span between the opening fence line and the closing ```, or
    None when the span is not one fenced block.
    """
    lo, hi = strip_span(text, lo, hi)
    if not text.startswith("```", lo):
        return None
    fence = _FENCE_OPEN_RE.match(text, lo, hi)
    if fence is None or hi - 3 < fence.end() or not text.endswith("```", fence.end(), hi):
        return None
    return fence.end(), hi - 3


def think_spans(text: str) -> list[tuple[int, int]]:
    """``(start, stop)`` of every ``<think>...</think>`` block; an unclosed one runs to the end."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (start := text.find(THINK_OPEN, pos)) >= 0:
        end = text.find(THINK_CLOSE, start)
        stop = len(text) if end < 0 else end + len(THINK_CLOSE)
        spans.append((start, stop))
        pos = stop
    return spans


# ------------------------------------------------------------------ XML text

# Characters XML 1.0 does not allow in a document (C0 controls other than tab,
# newline and carriage return, lone surrogates, U+FFFE, U+FFFF).
ILLEGAL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ENTITY_RE = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def escape_text(text: str) -> str:
    """Escape a text value so it cannot open, close or inject a tag.

    ``&``, ``<``, ``>`` become entities; ``\\r`` becomes ``&#13;`` so it survives
    the parser's line-ending normalisation (as in XML). Characters XML 1.0
    forbids (NUL and other C0 controls except tab/newline, lone surrogates,
    U+FFFE/U+FFFF) are replaced by U+FFFD: the one lossy step, so
    ``unescape_text(escape_text(s)) == s`` for every ``s`` made of legal characters.
    """
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if "\r" in text:
        text = text.replace("\r", "&#13;")
    return ILLEGAL_RE.sub("\ufffd", text)


def _decode_entity(m: re.Match[str]) -> str:
    named, dec, hexa = m.groups()
    if named is not None:
        return _NAMED[named]
    code = int(dec) if dec is not None else int(hexa, 16)
    # A reference to a character XML forbids stays literal: decoding &#0; would
    # smuggle a NUL past the INVALID_CHARACTER check into a note.
    if code > 0x10FFFF or ILLEGAL_RE.match(chr(code)) is not None:
        return m.group(0)
    return chr(code)


def unescape_text(text: str) -> str:
    """Reverse escaping: the five XML entities and numeric references.

    Unknown entities (``&foo;``) and bare ``&`` stay literal; no DTD or
    external entity is ever looked up or expanded.
    """
    if "&" not in text:
        return text
    if "&#" in text:
        return _ENTITY_RE.sub(_decode_entity, text)
    # Named entities only (the common case): str.replace is ~10x faster than a
    # regex callback per entity and keeps no piece per entity (on a 2 MB value of
    # "a < b &amp; c " the callback's peak was 6.4x the value, this 0.7x). "&amp;"
    # goes last so "&amp;lt;" decodes once, to "&lt;", exactly as the single-pass
    # regex does.
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
        .replace("&apos;", "'")
        .replace("&amp;", "&")
    )
