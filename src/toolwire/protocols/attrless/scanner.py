"""Tag-stack tokenizer and text escaping for seed 002's attribute-free envelopes.

One compiled regex finds every tag-like token after a ``<``; a small stack
turns the tokens into a tree of ``Node`` spans over the source string. Text is
never copied here: callers slice ``src[node.start:node.end]`` for the values
they need. Anything structurally wrong (attributes, self-closing tags, wrong
nesting, declarations, text or a second element outside the root) raises
``ProtocolError(LIBRARIAN_PROTOCOL_INVALID)`` at the first problem, with a
1-based line and column and one detail code. A well-formed text whose one
root is another element lacks the required root: ``LIBRARIAN_PARSE_FAILED``
(``MISSING_TAG:<root>``), as seed 002 rules for every missing required tag.
"""

from __future__ import annotations

import re

from toolwire.errors import LIBRARIAN_PARSE_FAILED, LIBRARIAN_PROTOCOL_INVALID, ProtocolError
from toolwire.protocols.text import ILLEGAL_RE, line_column, located_error

__all__ = ["MAX_DEPTH", "Node", "check_characters", "scan"]

MAX_DEPTH = 32  # bound on nesting for untrusted input (brief: 32 levels)

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*+"
# Alternatives, tried in order at each "<" (all quantifiers possessive: no backtracking):
#   1,2    a leaf element <x>text</x> in one match: the common case, one token not three
#   3      an opening tag <x> (whitespace before ">" is allowed, as in XML)
#   4      a closing tag </x>
#   5,6,7  a tag followed by whitespace or "/" and more: attributes or self-closing
#   8      <! or <? followed by a letter, "[" or "-": declaration, PI, comment, CDATA
# Anything else after "<" ("a < b", "<3", "<a:b>") is plain text.
_TOKEN_RE = re.compile(
    rf"<(?:({_NAME})\s*+>([^<]*+)</\1\s*+>"
    rf"|({_NAME})\s*+>"
    rf"|/({_NAME})\s*+>"
    rf"|(/?)({_NAME})([\s/][^<>]*+)>"
    r"|([!?])(?=[A-Za-z\[-]))",
    re.ASCII,
)
_DECL_RE = re.compile(r"<[!?](?:\[CDATA\[|--|[A-Za-z]*)")
_NON_SPACE_RE = re.compile(r"[^ \t\n]")
_LEAF = 2  # Match.lastindex of each alternative
_OPEN = 3
_CLOSE = 4
_BAD_TAG = 7


class Node:
    """One element: its name and spans in the source (``start:end`` is its content)."""

    __slots__ = ("name", "pos", "start", "end", "stop", "children")

    def __init__(
        self, name: str, pos: int, start: int, end: int, stop: int, children: list[Node]
    ) -> None:
        self.name = name
        self.pos = pos  # index of the "<" of the opening tag
        self.start = start  # first character of the content
        self.end = end  # index of the "<" of the closing tag
        self.stop = stop  # index just past the closing tag
        self.children = children

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.pos}, children={len(self.children)})"


def _fail(src: str, pos: int | None, detail: str, message: str) -> ProtocolError:
    return located_error(LIBRARIAN_PROTOCOL_INVALID, src, pos, detail, message)


def check_characters(src: str) -> None:
    """Reject characters XML 1.0 forbids (NUL, other C0 controls, lone surrogates, U+FFFE/F)."""
    m = ILLEGAL_RE.search(src)
    if m is not None:
        raise _fail(
            src,
            m.start(),
            "INVALID_CHARACTER",
            f"Character U+{ord(m.group()):04X} {{at}} is not allowed in this protocol: remove it.",
        )


def _check_gap(src: str, a: int, b: int, root: str) -> None:
    m = _NON_SPACE_RE.search(src, a, b)
    if m is not None:
        raise _fail(
            src,
            m.start(),
            "TEXT_OUTSIDE_ROOT",
            f"Text {{at}} is outside <{root}>: write nothing before <{root}> or after </{root}>.",
        )


def _top_level(src: str, m: re.Match[str], name: str, root: str, seen: bool, gap: int) -> None:
    """Checks for an element starting at depth 0: text before it, a second root."""
    _check_gap(src, gap, m.start(), root)
    if seen:
        raise _fail(
            src,
            m.start(),
            "MULTIPLE_ROOTS",
            f"A second top-level tag <{name}> starts {{at}}: put everything inside one "
            f"<{root}> element.",
        )


def _missing_root(src: str, top: Node, root: str) -> ProtocolError:
    # Seed 002: a missing required tag fails the parse (LIBRARIAN_PARSE_FAILED), and a
    # well-formed answer with another root is missing the one it needs. Only broken
    # structure is LIBRARIAN_PROTOCOL_INVALID.
    return located_error(
        LIBRARIAN_PARSE_FAILED,
        src,
        top.pos,
        f"MISSING_TAG:{root}",
        f"The answer is one <{top.name}> element ({{at}}), but it must be one <{root}> "
        f"element: answer with <{root}> ... </{root}>.",
    )


def _bad_tag(src: str, m: re.Match[str]) -> ProtocolError:
    slash, name, rest = m.group(5, 6, 7)
    shown = f"</{name}>" if slash else f"<{name}>"
    if not slash and rest.strip() == "/":
        return _fail(
            src,
            m.start(),
            "SELF_CLOSING_TAG",
            f"Tag <{name}/> {{at}} is self-closing; this protocol forbids self-closing tags: "
            f"write <{name}></{name}> instead.",
        )
    return _fail(
        src,
        m.start(),
        "ATTRIBUTES_NOT_ALLOWED",
        f"Tag {shown} {{at}} has attributes; this protocol forbids attributes: write {shown} "
        "with no attributes (if this was text, escape < as &lt;).",
    )


def _declaration(src: str, pos: int) -> ProtocolError:
    m = _DECL_RE.match(src, pos)
    what = m.group() if m is not None else src[pos : pos + 2]
    return _fail(
        src,
        pos,
        "DECLARATION_NOT_ALLOWED",
        f"{what} {{at}} is not allowed: write no XML declaration, DOCTYPE, ENTITY, "
        "comment or CDATA section; escape < in text as &lt;.",
    )


def scan(src: str, lo: int, hi: int, root: str) -> Node:
    """Tokenize ``src[lo:hi]`` into the tree of its single ``root`` element.

    Raises ``ProtocolError(LIBRARIAN_PROTOCOL_INVALID)`` on the first structural
    problem. Positions in the tree are indexes into ``src``.
    """
    stack: list[Node] = []
    top: Node | None = None
    gap = lo  # where text at depth 0 starts (after the root, once it is closed)
    for m in _TOKEN_RE.finditer(src, lo, hi):
        kind = m.lastindex
        if kind == _LEAF or kind == _OPEN:
            name = m.group(kind - 1 if kind == _LEAF else _OPEN)
            if not stack:
                _top_level(src, m, name, root, top is not None, gap)
            elif len(stack) >= MAX_DEPTH:
                raise _fail(
                    src,
                    m.start(),
                    "NESTING_TOO_DEEP",
                    f"Tag <{name}> {{at}} nests deeper than {MAX_DEPTH} levels: "
                    "flatten the response.",
                )
            if kind == _LEAF:
                node = Node(name, m.start(), m.start(2), m.end(2), m.end(), [])
                if stack:
                    stack[-1].children.append(node)
                else:
                    top, gap = node, m.end()
            else:
                node = Node(name, m.start(), m.end(), -1, -1, [])
                if stack:
                    stack[-1].children.append(node)
                else:
                    top = node
                stack.append(node)
        elif kind == _CLOSE:
            name = m.group(_CLOSE)
            if not stack:
                _check_gap(src, gap, m.start(), root)
                raise _fail(
                    src,
                    m.start(),
                    f"UNEXPECTED_CLOSING_TAG:{name}",
                    f"Closing tag </{name}> {{at}} has no matching opening tag: remove it.",
                )
            node = stack[-1]
            if node.name != name:
                open_line = line_column(src, node.pos)[0]
                raise _fail(
                    src,
                    m.start(),
                    f"MISMATCHED_CLOSING_TAG:expected_{node.name}_got_{name}",
                    f"Closing tag </{name}> {{at}} does not match the open tag <{node.name}> "
                    f"from line {open_line}: close <{node.name}> with </{node.name}> first.",
                )
            stack.pop()
            node.end, node.stop = m.start(), m.end()
            if not stack:
                gap = m.end()
        else:
            if not stack:
                _check_gap(src, gap, m.start(), root)
            if kind == _BAD_TAG:
                raise _bad_tag(src, m)
            raise _declaration(src, m.start())
    if stack:
        node = stack[-1]
        raise _fail(
            src,
            node.pos,
            f"UNCLOSED_TAG:{node.name}",
            f"Tag <{node.name}> opened {{at}} is never closed: add </{node.name}>.",
        )
    if top is None:
        raise _fail(
            src,
            None,
            "NO_ROOT",
            f"No <{root}> element found: answer with one <{root}> ... </{root}> element.",
        )
    _check_gap(src, gap, hi, root)
    if top.name != root:
        raise _missing_root(src, top, root)
    return top
