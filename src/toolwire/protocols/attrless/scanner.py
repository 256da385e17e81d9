"""Text to tree for seed 002's attribute-free envelopes: structure only.

One compiled regex finds every tag-like token after a ``<``; a small stack turns
the tokens into a tree of ``Node`` spans over the source (text is never copied).
Anything structurally wrong (attributes, self-closing tags, wrong nesting,
declarations, text or a second element outside the root) raises
``LIBRARIAN_PROTOCOL_INVALID`` at the first problem, with line, column and one
detail code.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from toolwire.errors import LIBRARIAN_PARSE_FAILED, LIBRARIAN_PROTOCOL_INVALID, ProtocolError
from toolwire.protocols.text import (
    ILLEGAL_RE,
    THINK_CLOSE,
    THINK_OPEN,
    fenced_span,
    line_column,
    located_error,
    reply_text,
    skip_blanks,
)

__all__ = ["MAX_DEPTH", "MAX_ELEMENTS", "TAG_NAME", "Node", "read"]

MAX_DEPTH = 32  # bound on nesting for untrusted input (brief: 32 levels)
# Bound on elements: an answer needs about 10 per operation, and each costs ~300 bytes of
# tree (8 MB of empty <operation> blocks made 110 MB).
MAX_ELEMENTS = 50_000

TAG_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*+"
# Alternatives, tried in order at each "<" (all quantifiers possessive: no backtracking):
#   1,2    a leaf element <x>text</x> in one match: the common case, one token not three
#   3      an opening tag <x> (whitespace before ">" is allowed, as in XML)
#   4      a closing tag </x>
#   5,6,7  a tag followed by whitespace or "/" and more: attributes or self-closing
#   8      <! or <? followed by a letter, "[" or "-": declaration, PI, comment, CDATA
# Anything else after "<" ("a < b", "<3", "<a:b>") is plain text.
_TOKEN_RE = re.compile(
    rf"<(?:({TAG_NAME})\s*+>([^<]*+)</\1\s*+>"
    rf"|({TAG_NAME})\s*+>"
    rf"|/({TAG_NAME})\s*+>"
    rf"|(/?)({TAG_NAME})([\s/][^<>]*+)>"
    r"|([!?])(?=[A-Za-z\[-]))",
    re.ASCII,
)
_DECL_RE = re.compile(r"<[!?](?:\[CDATA\[|--|[A-Za-z]*)")
_NON_SPACE_RE = re.compile(r"[^ \t\n]")
_LEAF = 2  # Match.lastindex of each alternative
_OPEN = 3
_CLOSE = 4
_BAD_TAG = 7

# Detail code -> the line for the model, both formatted with the problem's values;
# "{{at}}" becomes "at line L, column C".
_MESSAGES = {
    "INVALID_CHARACTER": "Character U+{codepoint:04X} {{at}} is not allowed in this protocol: "
    "remove it.",
    "TEXT_OUTSIDE_ROOT": "Text {{at}} is outside <{root}>: write nothing before <{root}> or "
    "after </{root}>.",
    "MULTIPLE_ROOTS": "A second top-level tag <{name}> starts {{at}}: put everything inside "
    "one <{root}> element.",
    "NESTING_TOO_DEEP": "Tag <{name}> {{at}} nests deeper than {depth} levels: flatten the "
    "response.",
    "TOO_MANY_ELEMENTS": "Tag <{name}> {{at}} is element {count} of this answer; the limit is "
    "{limit}: write fewer operations.",
    "UNEXPECTED_CLOSING_TAG:{name}": "Closing tag </{name}> {{at}} has no matching opening "
    "tag: remove it.",
    "MISMATCHED_CLOSING_TAG:expected_{open}_got_{name}": "Closing tag </{name}> {{at}} does "
    "not match the open tag <{open}> from line {line}: close <{open}> with </{open}> first.",
    "UNCLOSED_TAG:{name}": "Tag <{name}> opened {{at}} is never closed: add </{name}>.",
    "NO_ROOT": "No <{root}> element found: answer with one <{root}> ... </{root}> element.",
    "SELF_CLOSING_TAG": "Tag <{name}/> {{at}} is self-closing; this protocol forbids "
    "self-closing tags: write <{name}></{name}> instead.",
    "ATTRIBUTES_NOT_ALLOWED": "Tag {shown} {{at}} has attributes; this protocol forbids "
    "attributes: write {shown} with no attributes (if this was text, escape < as &lt;).",
    "DECLARATION_NOT_ALLOWED": "{what} {{at}} is not allowed: write no XML declaration, "
    "DOCTYPE, ENTITY, comment or CDATA section; escape < in text as &lt;.",
    # Seed 002: a missing required tag fails the parse (LIBRARIAN_PARSE_FAILED), and a
    # well-formed answer with another root is missing the one it needs. Only broken
    # structure is LIBRARIAN_PROTOCOL_INVALID.
    "MISSING_TAG:{root}": "The answer is one <{name}> element ({{at}}), but it must be one "
    "<{root}> element: answer with <{root}> ... </{root}>.",
}


@dataclass(slots=True)
class Node:
    """One element: its name and spans in the source (``start:end`` is its content)."""

    name: str
    pos: int  # index of the "<" of the opening tag
    start: int  # first character of the content
    end: int  # index of the "<" of the closing tag
    stop: int  # index just past the closing tag
    children: list[Node]


def _fail(
    src: str, pos: int | None, detail: str, code: str = LIBRARIAN_PROTOCOL_INVALID, **values: object
) -> ProtocolError:
    """The error of ``_MESSAGES[detail]`` at ``src[pos]``, formatted with ``values``."""
    message = _MESSAGES[detail].format(**values)
    return located_error(code, src, pos, detail.format(**values), message)


def read(text: str | bytes, root: str, lenient: bool) -> tuple[str, Node, list[str]]:
    """The tree of ``text``'s single ``root`` element, the text its positions index
    (line endings normalised to ``\\n``, the seed's rule), and notes on what was tolerated.

    ``lenient`` skips, and notes, a leading <think> block and a markdown code fence
    around the envelope.
    """
    src = reply_text(text, LIBRARIAN_PROTOCOL_INVALID)
    if "\r" in src:
        src = src.replace("\r\n", "\n").replace("\r", "\n")
    # Characters XML 1.0 forbids: NUL, other C0 controls, lone surrogates, U+FFFE/F.
    m = ILLEGAL_RE.search(src)
    if m is not None:
        raise _fail(src, m.start(), "INVALID_CHARACTER", codepoint=ord(m.group()))
    notes: list[str] = []
    lo, hi = 0, len(src)
    if lenient:
        lo = skip_blanks(src)
        if src.startswith(THINK_OPEN, lo):
            close = src.find(THINK_CLOSE, lo)
            if close >= 0:
                notes.append("dropped a leading <think> block")
                lo = skip_blanks(src, close + len(THINK_CLOSE))
        span = fenced_span(src, lo)
        if span is not None:
            notes.append("removed a markdown code fence around the response")
            lo, hi = span
    return src, _scan(src, lo, hi, root), notes


def _check_gap(src: str, a: int, b: int, root: str) -> None:
    m = _NON_SPACE_RE.search(src, a, b)
    if m is not None:
        raise _fail(src, m.start(), "TEXT_OUTSIDE_ROOT", root=root)


def _scan(src: str, lo: int, hi: int, root: str) -> Node:
    """Tokenize ``src[lo:hi]`` into the tree of its single ``root`` element.

    Raises ``ProtocolError(LIBRARIAN_PROTOCOL_INVALID)`` on the first structural
    problem. Positions in the tree are indexes into ``src``.
    """
    stack: list[Node] = []
    tops: list[Node] = []  # elements at depth 0: one, or MULTIPLE_ROOTS
    gap = lo  # where text at depth 0 starts (after the root, once it is closed)
    elements = 0
    for m in _TOKEN_RE.finditer(src, lo, hi):
        kind, at = m.lastindex, m.start()
        if kind == _LEAF or kind == _OPEN:
            name = sys.intern(m.group(1 if kind == _LEAF else _OPEN))  # one str per tag name
            if not stack:
                _check_gap(src, gap, at, root)
                if tops:
                    raise _fail(src, at, "MULTIPLE_ROOTS", name=name, root=root)
            elif len(stack) >= MAX_DEPTH:
                raise _fail(src, at, "NESTING_TOO_DEEP", name=name, depth=MAX_DEPTH)
            elements += 1
            if elements > MAX_ELEMENTS:
                limit = MAX_ELEMENTS
                raise _fail(src, at, "TOO_MANY_ELEMENTS", name=name, count=elements, limit=limit)
            if kind == _LEAF:
                node = Node(name, at, m.start(2), m.end(2), m.end(), [])
            else:
                node = Node(name, at, m.end(), -1, -1, [])
            (stack[-1].children if stack else tops).append(node)
            if kind == _OPEN:
                stack.append(node)
            elif not stack:
                gap = m.end()
        elif kind == _CLOSE:
            name = m.group(_CLOSE)
            if not stack:
                _check_gap(src, gap, at, root)
                raise _fail(src, at, "UNEXPECTED_CLOSING_TAG:{name}", name=name)
            node = stack.pop()
            if node.name != name:
                line = line_column(src, node.pos)[0]
                detail = "MISMATCHED_CLOSING_TAG:expected_{open}_got_{name}"
                raise _fail(src, at, detail, name=name, open=node.name, line=line)
            node.end, node.stop = at, m.end()
            if not stack:
                gap = m.end()
        else:
            if not stack:
                _check_gap(src, gap, at, root)
            if kind != _BAD_TAG:
                decl = _DECL_RE.match(src, at)
                what = decl.group() if decl is not None else src[at : at + 2]
                raise _fail(src, at, "DECLARATION_NOT_ALLOWED", what=what)
            slash, name, rest = m.group(5, 6, 7)
            if not slash and rest.strip() == "/":
                raise _fail(src, at, "SELF_CLOSING_TAG", name=name)
            raise _fail(src, at, "ATTRIBUTES_NOT_ALLOWED", shown=f"<{slash}{name}>")
    if stack:
        raise _fail(src, stack[-1].pos, "UNCLOSED_TAG:{name}", name=stack[-1].name)
    if not tops:
        raise _fail(src, None, "NO_ROOT", root=root)
    _check_gap(src, gap, hi, root)
    if tops[0].name != root:
        detail = "MISSING_TAG:{root}"
        raise _fail(src, tops[0].pos, detail, LIBRARIAN_PARSE_FAILED, name=tops[0].name, root=root)
    return tops[0]
