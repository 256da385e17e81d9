"""Where a note's prose is: outside code, raw HTML and comments (CommonMark's blocks).

Tags are read, and a retag rewrites them, only in prose (issue 45 item 5: ``#tags``
inside HTML comments, indented code, ``<pre>`` blocks, or a fence an over-indented line
did not close were read as tags and rewritten). One pass over the lines decides each
line's block as CommonMark does for the blocks that hold no prose:

- fenced code: opened by 3+ backticks or tildes indented at most 3 spaces, closed only
  by a run of the same character at least as long, indented at most 3 spaces, with
  nothing after it; an unclosed fence runs to the end;
- indented code: 4+ columns of indentation (beyond a list item's content column) where
  no paragraph is open (a paragraph's indented line continues it);
- HTML blocks: ``<pre``/``<script``/``<style``/``<textarea`` to their closing tag,
  ``<!--`` to ``-->``, ``<?`` to ``?>``, ``<!X`` to ``>``, ``<![CDATA[`` to ``]]>``; a
  block-level tag, or any lone tag where no paragraph is open, to a blank line.

Inside prose, code spans (a run of n backticks to the next run of exactly n, never
across a paragraph), inline comments and inline tags are cut out too. Everything is
linear: backtick runs are matched through a queue per run length (a run of 3,000
backticks took hours in the old pattern, issue 45 item 6) and every other search is
a ``str.find`` or a bounded pattern. markdown-it-py (a full CommonMark parser) is the
oracle in the tests, not the reader here: it reads ~0.4 MB/s, this ~4 MB/s, and
every note's tags and title go through this on every load.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from functools import partial

__all__ = ["map_prose", "prose_spans"]

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_BLANK = re.compile(r"[ \t]*\r?\n?\Z")
# CommonMark HTML block start conditions 1-5: (start, end marker), case-insensitive.
_HTML_RAW = re.compile(r" {0,3}<(pre|script|style|textarea)(?=[\s>]|$)", re.IGNORECASE)
_HTML_OTHER = (
    (re.compile(r" {0,3}<!--"), "-->"),
    (re.compile(r" {0,3}<\?"), "?>"),
    (re.compile(r" {0,3}<!\[CDATA\["), "]]>"),
    (re.compile(r" {0,3}<![A-Za-z]"), ">"),
)
# Condition 6: a block-level tag name; condition 7: any complete tag alone on its line.
_HTML_BLOCK_TAG = re.compile(
    r" {0,3}</?(?:address|article|aside|base|basefont|blockquote|body|caption|center|col"
    r"|colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form"
    r"|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu"
    r"|menuitem|nav|noframes|ol|optgroup|option|p|param|search|section|summary|table"
    r"|tbody|td|tfoot|th|thead|title|tr|track|ul)(?:[\s>]|/>|$)",
    re.IGNORECASE,
)
_HTML_LONE_TAG = re.compile(
    r" {0,3}(?:<[A-Za-z][A-Za-z0-9-]{0,64}(?:\s+[A-Za-z_:][\w.:-]{0,64}"
    r"(?:\s*=\s*(?:\"[^\"\n]{0,2000}\"|'[^'\n]{0,2000}'|[^\s\"'=<>`]{1,2000}))?){0,64}"
    r"\s*/?>|</[A-Za-z][A-Za-z0-9-]{0,64}\s*>)[ \t]*\r?\n?\Z"
)
_LIST_ITEM = re.compile(r"( {0,3})(?:[-+*]|\d{1,9}[.)])(?:( {1,4})(?=\S)|[ \t]*\r?\n?\Z)")
_BACKTICKS = re.compile(r"`+")
# Anything that can start code or HTML: without it a text is prose whole.
_MAYBE_NOT_PROSE = re.compile(r"[`~<]|^(?: {4}|[ ]{0,3}\t)", re.MULTILINE)
# Inline raw HTML: a tag (bounded, so a run of "<a" without ">" stays linear).
_INLINE_TAG = re.compile(
    r"</?[A-Za-z][A-Za-z0-9-]{0,64}(?:\s+[A-Za-z_:][\w.:-]{0,64}"
    r"(?:\s*=\s*(?:\"[^\"]{0,2000}\"|'[^']{0,2000}'|[^\s\"'=<>`]{1,2000}))?){0,64}\s*/?>"
)


def _columns(line: str) -> int:
    """The indentation of ``line`` in columns (a tab to the next multiple of 4)."""
    if line[:1] not in (" ", "\t"):
        return 0
    col = 0
    for ch in line:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col += 4 - col % 4
        else:
            break
    return col


def _lines(text: str) -> Iterator[tuple[int, str]]:
    pos = 0
    for line in text.splitlines(keepends=True):
        yield pos, line
        pos += len(line)


def _prose_blocks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of prose lines (a paragraph, a heading...): every
    line that is not in a code block or an HTML block, split where those are."""
    blocks: list[tuple[int, int]] = []
    run_start: int | None = None
    close: Callable[[str], bool] | None = None  # the open code or HTML block's end test
    paragraph = False  # a paragraph is open: an indented line or a lone tag continues it
    list_content = 0  # the content column of the list item the lines are in
    code_until: int | None = None  # in indented code: the indentation that stays in it

    def end_run(at: int) -> None:
        nonlocal run_start
        if run_start is not None and at > run_start:
            blocks.append((run_start, at))
        run_start = None

    for pos, line in _lines(text):
        if code_until is not None:  # indented code: ends before a less indented line
            if _BLANK.match(line) or _columns(line) >= code_until:
                continue
            code_until = None
        if close is not None:  # inside a fenced code or HTML block
            if close(line):
                close = None
            continue
        if _BLANK.match(line):
            end_run(pos)
            paragraph = False
            continue
        indent = _columns(line)
        inside = min(indent, list_content)  # columns that belong to the list item
        body = line[_offset(line, inside) :]
        item = _LIST_ITEM.match(body)
        if not paragraph and item is None and indent < list_content:
            list_content = 0  # the list ended (a lazy line only continues a paragraph)
        if not paragraph and indent >= list_content + 4:  # indented code
            end_run(pos)
            code_until = list_content + 4
            continue
        opened = _block_start(body, paragraph)
        if opened is not None:
            end_run(pos)
            paragraph = False
            close = None if opened(body, True) else partial(_later_line, opened)
            continue
        if item is not None:  # its content column: where its text starts
            list_content = inside + len(item.group(0).rstrip("\r\n"))
            list_content += 0 if item.group(2) else 1
        if run_start is None:
            run_start = pos
        paragraph = not _heading(body)
    end_run(len(text))
    return blocks


def _later_line(end: Callable[[str, bool], bool], line: str) -> bool:
    return end(line, False)


def _offset(line: str, columns: int) -> int:
    """The index in ``line`` where ``columns`` of indentation end (or its first non-space)."""
    col = i = 0
    while i < len(line) and col < columns and line[i] in " \t":
        col += 1 if line[i] == " " else 4 - col % 4
        i += 1
    return i


def _heading(line: str) -> bool:
    stripped = line.lstrip(" ")
    return (
        len(line) - len(stripped) <= 3
        and stripped.startswith("#")
        and (stripped.lstrip("#")[:1] in ("", " ", "\t", "\n", "\r"))
        and len(stripped) - len(stripped.lstrip("#")) <= 6
    )


def _to_blank(line: str, same_line: bool) -> bool:
    return not same_line and _BLANK.match(line) is not None


def _marker_end(marker: str, start: re.Pattern[str], line: str, same_line: bool) -> bool:
    """Whether ``line`` ends an HTML block opened by ``start`` that ends at ``marker``
    (on the opening line, only after the opening match)."""
    if same_line:
        m = start.match(line)
        return m is not None and marker in line[m.end() :].lower()
    return marker in line.lower()


def _fence_end(mark: str, line: str, same_line: bool) -> bool:
    if same_line:
        return False
    stripped = line.rstrip("\r\n").rstrip(" \t")
    indent = len(stripped) - len(stripped.lstrip(" "))
    run = stripped.lstrip(" ")
    return indent <= 3 and len(run) >= len(mark) and run == mark[0] * len(run)


def _block_start(line: str, paragraph: bool) -> Callable[[str, bool], bool] | None:
    """The end test of the code or HTML block ``line`` opens (called with the opening
    line and ``same_line=True`` first), or None: ``line`` is prose."""
    first = line.lstrip(" ")[:1]
    if first in ("`", "~"):
        fence = _FENCE_OPEN.match(line)
        return None if fence is None else partial(_fence_end, fence.group(1))
    if first != "<":
        return None
    raw = _HTML_RAW.match(line)
    if raw is not None:
        return partial(_marker_end, f"</{raw.group(1).lower()}>", _HTML_RAW)
    for start, marker in _HTML_OTHER:
        if start.match(line):
            return partial(_marker_end, marker, start)
    if _HTML_BLOCK_TAG.match(line) or (not paragraph and _HTML_LONE_TAG.match(line)):
        return _to_blank
    return None


def _code_spans(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Code spans in ``text[start:end]`` (one paragraph): a run of n backticks to the
    next run of exactly n. Linear: each length's runs wait in a queue, and a run that
    closes nothing is skipped once (the old pattern backtracked ~n^3.5 on 3,000 ticks)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text, start, end)]
    by_length: dict[int, deque[int]] = defaultdict(deque)
    for i, (a, b) in enumerate(runs):
        by_length[b - a].append(i)
    i = 0
    while i < len(runs):
        a, b = runs[i]
        waiting = by_length[b - a]
        while waiting and waiting[0] <= i:
            waiting.popleft()
        if waiting:
            j = waiting.popleft()
            yield a, runs[j][1]
            i = j + 1
        else:
            i += 1


def _raw_html(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Inline comments (``<!--`` to ``-->``, or to the paragraph's end) and tags."""
    pos = start
    while True:
        lt = text.find("<", pos, end)
        if lt < 0:
            return
        if text.startswith("<!--", lt):
            close = text.find("-->", lt + 4, end)
            stop = end if close < 0 else close + 3
            yield lt, stop
            pos = stop
            continue
        m = _INLINE_TAG.match(text, lt, end)
        if m is not None:
            yield lt, m.end()
            pos = m.end()
        else:
            pos = lt + 1


def prose_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the prose of ``text``, in order: outside code blocks, HTML
    blocks, code spans, inline comments and tags."""
    if not _MAYBE_NOT_PROSE.search(text):  # most notes: no code, no HTML, no indent
        return [(0, len(text))] if text else []
    spans: list[tuple[int, int]] = []
    for start, end in _prose_blocks(text):
        cuts = sorted([*_code_spans(text, start, end), *_raw_html(text, start, end)])
        pos = start
        for a, b in cuts:
            if a < pos:  # inside a cut already (a tag in a code span): the first wins
                continue
            spans.append((pos, a))
            pos = b
        spans.append((pos, end))
    return [(a, b) for a, b in spans if b > a]


def map_prose(text: str, fn: Callable[[str], str]) -> str:
    """Apply ``fn`` to the prose of ``text``, leaving code, raw HTML and comments as
    they are."""
    out: list[str] = []
    pos = 0
    for start, end in prose_spans(text):
        out.append(text[pos:start])
        out.append(fn(text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)
