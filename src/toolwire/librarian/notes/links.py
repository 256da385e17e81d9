"""Links in a note body, found by a markdown parser (markdown-it-py, CommonMark + tables).

What counts as a link is what a CommonMark renderer turns into one:

* inline links ``[text](target "title")``, with nested brackets in the text,
  parentheses in the target and ``<angle bracketed targets>``;
* reference links ``[text][ref]``, ``[ref][]`` and ``[ref]``, resolved against
  the note's ``[ref]: target`` definitions (a reference without a definition
  is text, as it renders);
* autolinks ``<https://...>`` and ``<user@host>``;
* Obsidian's ``[[wiki|alias]]`` links (an inline rule of ours, so they obey the
  same rules as the others: nothing inside code counts).

Never links: anything in code spans, fenced or indented code blocks and raw
HTML, and images (``![alt](a.png)``). A target is kept *as written*: the
parser's URL normalisation is off, so ``a b.md`` stays ``a b.md`` and a
``javascript:`` target is still a link (the renderer would refuse it; the
relink rule must see it).

Each link carries its span in the scanned text, so :func:`strip_links` can
remove links (and reference definitions) while leaving every other character
where it was: the relink rule compares what is left.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_inline import autolink, link

__all__ = ["INLINE_BUDGET", "PARSE_LIMIT", "Link", "LinkScan", "scan_links", "strip_links"]

_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_BACKTICKS = re.compile(r"`+")
# The paragraph fallback's inline link: [text](target "title"), images excluded.
# Bounded repeats keep it linear on any paragraph.
_FALLBACK_LINK = re.compile(
    r"(?<!!)\[[^\[\]]{0,2000}\]\(\s{0,50}(<[^<>\n]{0,2000}>|[^\s()<>]{1,2000})"
    r"(?:\s{1,50}\"[^\"\n]{0,500}\")?\s{0,50}\)"
)
# '[' count x length of a paragraph beyond which markdown-it's label scan is skipped.
INLINE_BUDGET = 20_000_000
# Characters of a body beyond which it is not parsed (markdown-it-py reads 80 KiB/s
# at worst, tiny paragraphs; 3.5 MiB/s on real notes): the regex fallback reads it.
PARSE_LIMIT = 100_000
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# How an autolink starts (<scheme: or <user@); every other link starts with "[".
_AUTOLINK_START = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:|[^<>\s@]+@)")
_FOUND = "toolwire_links"  # env key: raw link records of one parse
_CURRENT = "toolwire_inline"  # env key: index of the inline token being parsed


@dataclass(frozen=True, slots=True)
class Link:
    """One link: ``kind`` is ``link`` (inline or reference), ``autolink`` or ``wiki``."""

    kind: str
    target: str  # the destination as written (no <>, escapes resolved); wiki: the inner text
    start: int | None  # span in LinkScan.text; None if it could not be placed (then kept)
    end: int | None


@dataclass(frozen=True, slots=True)
class LinkScan:
    text: str  # the body with \r\n and \r as \n and NUL as U+FFFD (what the parser reads)
    links: tuple[Link, ...]  # in document order
    definitions: tuple[tuple[int, int], ...]  # spans of reference definitions (whole lines)


@dataclass(frozen=True, slots=True)
class _Raw:
    token: int  # index of the inline token whose content holds the link
    start: int  # span in that content
    end: int
    kind: str
    target: str


def _recording(rule: Any, kind: str) -> Any:
    """``rule`` (markdown-it's link or autolink rule), noting every link it makes."""

    def wrapped(state: Any, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            opened = next(
                (t for t in state.tokens[count:] if t.type == "link_open"), None
            )  # push() may first flush pending text, so the link need not be tokens[count]
            if opened is not None:
                href = str((opened.attrs or {}).get("href") or "")
                state.env[_FOUND].append(_Raw(state.env[_CURRENT], start, state.pos, kind, href))
        return True

    return wrapped


def _wiki_rule(state: Any, silent: bool) -> bool:
    """``[[target|alias]]`` as one inline token (so code spans keep theirs as text)."""
    if not state.src.startswith("[[", state.pos):
        return False
    m = _WIKI.match(state.src, state.pos, state.posMax)
    if m is None:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.content = m.group(1)
        state.env[_FOUND].append(_Raw(state.env[_CURRENT], m.start(), m.end(), "wiki", m.group(1)))
    state.pos = m.end()
    return True


def _inline_core(state: Any) -> None:
    """markdown-it's core ``inline`` rule, telling the inline rules which token they parse.

    A paragraph with many unclosed ``[`` costs markdown-it's label scan time
    quadratic in its length (150 KiB of ``[x`` lines: seconds). Past
    ``INLINE_BUDGET`` such a paragraph is read by :func:`_fallback_links` instead.
    """
    for index, token in enumerate(state.tokens):
        if token.type == "inline":
            if token.children is None:
                token.children = []
            content = token.content
            if "[" not in content and "<" not in content:
                continue  # every link starts with one of them: nothing to find here
            if content.count("[") * len(content) > INLINE_BUDGET:
                state.env[_FOUND] += _fallback_links(index, content)
                continue
            state.env[_CURRENT] = index
            state.md.inline.parse(content, state.md, state.env, token.children)


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Code spans in linear time: a run of n backticks up to the next run of n."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    by_length: dict[int, list[int]] = {}
    for i, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(i)
    spans = []
    i = 0
    while i < len(runs):
        same = by_length[runs[i][1] - runs[i][0]]
        k = bisect.bisect_right(same, i)
        if k == len(same):
            i += 1  # never closed: literal backticks
            continue
        spans.append((runs[i][0], runs[same[k]][1]))
        i = same[k] + 1
    return spans


def _mask_fences(text: str) -> str:
    """``text`` with fenced code blocks blanked (newlines kept, so offsets hold)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        if fence is None:
            m = _FENCE.match(line)
            if m is None:
                out.append(line)
                continue
            fence = m.group(1)
        elif line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
            fence = None
        out.append(re.sub(r"[^\n]", " ", line))
    return "".join(out)


def _fallback_links(index: int, content: str) -> list[_Raw]:
    """Inline ``[text](target)`` and wiki links found by regex outside code spans (no
    reference links, no nested brackets, no autolinks): linear time, for what the
    parser would take too long over (a paragraph, or a body with its fences blanked)."""
    masked = list(content)
    for start, end in _code_spans(content):
        masked[start:end] = " " * (end - start)
    text = "".join(masked)
    found = [_Raw(index, m.start(), m.end(), "wiki", m.group(1)) for m in _WIKI.finditer(text)]
    for m in _FALLBACK_LINK.finditer(text):
        target = m.group(1)
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        found.append(_Raw(index, m.start(), m.end(), "link", target))
    return found


_PARSER: Any = None
_PARSER_LOCK = threading.Lock()


class _AsWritten(MarkdownIt):
    """CommonMark with targets kept as written: no URL normalisation, no refusals."""

    def normalizeLink(self, url: str) -> str:  # noqa: N802 - markdown-it's name
        return url

    def validateLink(self, url: str) -> bool:  # noqa: N802
        return True


def _parser() -> Any:
    """The shared parser (built on first use: building it runs every rule's setup)."""
    global _PARSER
    with _PARSER_LOCK:
        if _PARSER is None:
            md = _AsWritten("commonmark").enable("table")
            # Emphasis cannot make or break a link: skip its delimiter bookkeeping.
            md.disable(["emphasis"])
            md.inline.ruler.at("link", _recording(link, "link"))
            md.inline.ruler.at("autolink", _recording(autolink, "autolink"))
            md.inline.ruler.before("link", "wikilink", _wiki_rule)
            md.core.ruler.at("inline", _inline_core)
            _PARSER = md
        return _PARSER


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _place(text: str, content: str, line: int, starts: list[int], cursor: int) -> list[int] | None:
    """Where each line of an inline token's ``content`` starts in ``text``, or None.

    A token's content is its source lines ``line``, ``line + 1``, ... less their
    container prefixes (indentation, ``>``, list markers, heading marks, table
    pipes) and outer blanks, so each content line is found on its source line; a
    tab the parser expanded to spaces is matched by what follows it. ``cursor``
    keeps table cells of one row apart. Content the source does not hold verbatim
    (an escaped pipe in a table cell) cannot be placed: None.
    """
    origins: list[int] = []
    for k, piece in enumerate(content.split("\n")):
        row = line + k
        if row >= len(starts):
            return None
        lo = max(starts[row], cursor) if k == 0 else starts[row]
        hi = starts[row + 1] if row + 1 < len(starts) else len(text)
        at = text.find(piece, lo, hi)
        if at < 0:  # leading blanks that were a tab in the source: place the rest
            core = piece.lstrip(" ")
            found = text.find(core, lo, hi) if core else -1
            if found < 0:
                return None
            at = found - (len(piece) - len(core))
        origins.append(at)
    return origins


def scan_links(body: str) -> LinkScan:
    """Every link of ``body`` (see the module docstring), in document order."""
    text = body.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    if "[" not in text and _AUTOLINK_START.search(text) is None:
        return LinkScan(text, (), ())  # no link can start: skip the parser
    if len(text) > PARSE_LIMIT:
        raws = sorted(_fallback_links(-1, _mask_fences(text)), key=lambda r: r.start)
        return LinkScan(text, tuple(Link(r.kind, r.target, r.start, r.end) for r in raws), ())
    env: dict[str, Any] = {_FOUND: [], _CURRENT: -1}
    tokens = _parser().parse(text, env)
    starts = _line_starts(text)
    found: list[_Raw] = sorted(env[_FOUND], key=lambda r: (r.token, r.start))
    wanted = {raw.token for raw in found}
    origins: dict[int, tuple[list[int], list[int]] | None] = {}
    cursor = 0
    for index, token in enumerate(tokens):
        if token.type != "inline" or not token.map:
            continue
        placed = _place(text, token.content, token.map[0], starts, cursor)
        if placed is not None:
            last = token.content.rsplit("\n", 1)[-1]
            cursor = placed[-1] + len(last)
        if index in wanted:
            origins[index] = (_line_starts(token.content), placed) if placed is not None else None
    links = []
    for raw in found:
        placed_token = origins.get(raw.token)
        start = end = None
        if placed_token is not None:
            start = _to_text(*placed_token, raw.start)
            end = _to_text(*placed_token, raw.end - 1) + 1
        links.append(Link(raw.kind, raw.target, start, end))
    definitions = []
    refs = list((env.get("references") or {}).values()) + list(env.get("duplicate_refs") or ())
    for ref in refs:
        first, stop = ref.get("map") or (0, 0)
        if 0 <= first < stop and first < len(starts):
            definitions.append((starts[first], starts[stop] if stop < len(starts) else len(text)))
    return LinkScan(text, tuple(links), tuple(sorted(definitions)))


def _to_text(content_lines: list[int], origins: list[int], offset: int) -> int:
    """``offset`` in an inline token's content (whose lines start at ``content_lines``)
    as an offset in the scanned text."""
    line = bisect.bisect_right(content_lines, offset) - 1
    return origins[line] + (offset - content_lines[line])


def strip_links(body: str) -> str:
    """``body`` without its links and reference definitions; all else stays in place.

    Line endings come out as ``\\n``. A link the parser found but could not place
    in the text (a rare tab-indented continuation line) is left in: the text then
    differs wherever that link changed, which errs on the side of refusing.
    """
    scan = scan_links(body)
    spans = sorted(
        [(found.start, found.end) for found in scan.links if found.start is not None]
        + list(scan.definitions)
    )
    out: list[str] = []
    pos = 0
    for start, end in spans:
        assert start is not None and end is not None
        if start < pos:  # inside a span already removed (a wiki link in a link's text)
            pos = max(pos, end)
            continue
        out.append(scan.text[pos:start])
        pos = end
    out.append(scan.text[pos:])
    return "".join(out)
