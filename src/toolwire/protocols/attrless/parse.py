"""Seed 002's envelopes read back: ``parse_response`` (a model's answer) and
``parse_request`` (replay, the ``render`` command, round trips). After the
scanner's structure, every semantic problem is collected as a detail code in one
``LIBRARIAN_PARSE_FAILED``. Nothing but ``ProtocolError`` leaves, whatever the text.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from toolwire.domain import OPERATION_KINDS, RESPONSE_STATUSES, LibrarianResponse, Operation
from toolwire.errors import LIBRARIAN_PARSE_FAILED, LIBRARIAN_PROTOCOL_INVALID
from toolwire.protocols.attrless.render import (
    OPERATION_TAGS,
    REQUEST_ROOT,
    RESPONSE_ROOT,
    LibrarianRequest,
    Source,
)
from toolwire.protocols.attrless.scanner import Node, read
from toolwire.protocols.text import Lines, Problems, guarded, unescape_text

__all__ = ["parse_request", "parse_response"]

_TARGETS = ("target_note_id", "target_path")  # one of them is required, either may be absent
_RESPONSE_FIELDS = ("request_id", "status", "summary")
_RESPONSE_TAGS = frozenset((*_RESPONSE_FIELDS, "operations", "warnings"))
_REQUEST_FIELDS = ("request_id", "goal", "scope", "output_contract")
_SOURCE_TAGS = ("source_id", "title", "body_markdown", "kind")
_WS = " \t\n"  # XML whitespace, after line-ending normalisation
_NON_SPACE_RE = re.compile(r"[^ \t\n]")
# A plain decimal: digits with an optional fraction ("0", "0.7", "1.0", ".5").
# No sign, exponent, nan or inf: float() accepts those, the seed does not.
_CONFIDENCE_RE = re.compile(r"([0-9]*)(?:\.([0-9]*))?\Z", re.ASCII)

# One line for the model per detail code; {who} is "<librarian_response>" or "operation[i]".
_MESSAGES = {
    "MISSING_TAG": "{who} has no <{tag}>: add it.",
    "DUPLICATE_TAG": "{who} has more than one <{tag}>: keep exactly one.",
    "EMPTY_TAG": "{who}: <{tag}> is empty: write a value.",
    "INVALID_STATUS": "{who}: <status> is {value}: use ok, needs_clarification or rejected.",
    "INVALID_KIND": "{who}: <kind> is {value}: use one of " + ", ".join(OPERATION_KINDS) + ".",
    "MISSING_TARGET": "{who} has no target: add <target_note_id> (<target_path> for create_note).",
    "INVALID_CONFIDENCE": "{who}: <confidence> is {value}: write a plain decimal from 0.0 to "
    "1.0, such as 0.8 (no sign, exponent, percent or words).",
    "INVALID_CONFIDENCE_RANGE": "{who}: <confidence> is {value}: it must be from 0.0 to 1.0.",
    "UNKNOWN_TAG": "{who} contains <{tag}> ({value}), which this protocol does not define "
    "there: remove it.",
    "UNEXPECTED_TEXT": "{who} has text directly inside <{tag}>: put text only inside field tags.",
}


# ------------------------------------------------------------------ values


def _text(raw: str, block: bool = False) -> str:
    """A value with its entities decoded. A field loses its surrounding whitespace; a
    body keeps it, but for one newline after the open tag and one before the close tag
    (they belong to the layout)."""
    raw = raw.removeprefix("\n").removesuffix("\n") if block else raw.strip(_WS)
    return unescape_text(raw)


def _blank(value: str) -> bool:
    return not value.strip(_WS)


def _show(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


def _confidence_problem(value: str) -> str | None:
    """The detail code saying why ``value`` is not a confidence, or None."""
    m = _CONFIDENCE_RE.match(value)
    if m is None or not (m.group(1) or m.group(2)):
        return "INVALID_CONFIDENCE"
    # Range-check the digits, not the float: exact, and no int() of a huge string.
    whole, frac = m.group(1).lstrip("0"), m.group(2) or ""
    if whole and (whole != "1" or frac.strip("0")):
        return "INVALID_CONFIDENCE_RANGE"
    return None


def _groups(node: Node | None) -> dict[str, list[Node]]:
    """The children of ``node`` by name, in document order."""
    groups: dict[str, list[Node]] = {}
    for child in node.children if node is not None else ():
        groups.setdefault(child.name, []).append(child)
    return groups


# ------------------------------------------------------------------ checks


class _Checker:
    """The semantic checks of one envelope: every problem (a detail code and a line for the
    model) and the parse warnings for tolerated deviations.

    ``who`` names the element a problem is in: "<tag>", or "operation[i]" / "source[i]",
    which also prefixes the detail code.
    """

    def __init__(self, src: str, strict: bool, notes: list[str]) -> None:
        self.src = src
        self.strict = strict
        self.notes = notes
        self.positions = Lines(src)
        self.problems = Problems()

    def problem(self, who: str, code: str, tag: str = "", value: str = "") -> None:
        prefix = "" if who.startswith("<") else f"{who}:"
        detail = f"{prefix}{code}:{tag}" if tag else prefix + code
        line = _MESSAGES[code].format(who=who, tag=tag, value=value)
        self.problems.add(detail, line, once=True)

    def one(self, groups: dict[str, list[Node]], name: str, who: str) -> Node | None:
        """The one <name> child, or None after recording it as duplicated or missing
        (a target may be missing: MISSING_TARGET says when both are)."""
        nodes = groups.get(name, [])
        if len(nodes) > 1:
            self.problem(who, "DUPLICATE_TAG", name)
            return None
        if not nodes and name not in _TARGETS:
            self.problem(who, "MISSING_TAG", name)
        return nodes[0] if nodes else None

    def fields(
        self, groups: dict[str, list[Node]], tags: tuple[str, ...], who: str, check: bool
    ) -> dict[str, str]:
        """The value of each of ``tags`` present exactly once; with ``check``, each is
        validated as soon as it is read (the details keep the tags' order)."""
        values: dict[str, str] = {}
        for name in tags:
            child = self.one(groups, name, who)
            if child is not None:
                values[name] = value = self.value(child, who, name == "body_markdown")
                if check:
                    self.check(who, name, value)
        return values

    def check(self, who: str, name: str, value: str) -> None:
        """A response field's rules: not empty (a target may be), a known status and kind,
        a plain decimal confidence."""
        if _blank(value):
            if name not in _TARGETS:
                self.problem(who, "EMPTY_TAG", name)
        elif name == "status" and value not in RESPONSE_STATUSES:
            self.problem(who, "INVALID_STATUS", value=_show(value))
        elif name == "kind" and value not in OPERATION_KINDS:
            self.problem(who, "INVALID_KIND", value=_show(value))
        elif name == "confidence" and (code := _confidence_problem(value)) is not None:
            self.problem(who, code, value=_show(value))

    def value(self, node: Node, who: str, block: bool = False) -> str:
        """A field's value; tags nested in a field are kept as text (strict: an error)."""
        for inner in node.children:
            self.unknown(inner, who, node.name, kept=True)
        return _text(self.src[node.start : node.end], block)

    def unknown(self, node: Node, who: str, parent: str, kept: bool = False) -> None:
        line, col = self.positions.at(node.pos)
        where = f"line {line}, column {col}"
        if self.strict:
            self.problem(who, "UNKNOWN_TAG", node.name, where)
        elif kept:
            self.notes.append(f"kept tag <{node.name}> inside <{parent}> as text ({where})")
        else:
            self.notes.append(f"ignored unknown tag <{node.name}> inside <{parent}> ({where})")

    def unknown_children(self, node: Node, known: Collection[str], who: str) -> None:
        for child in node.children:
            if child.name not in known:
                self.unknown(child, who, node.name)

    def direct_text(self, node: Node, who: str) -> None:
        """Strict mode only: text directly inside a container tag (between its children) is
        an error."""
        if not self.strict:
            return
        starts = [node.start] + [child.stop for child in node.children]
        ends = [child.pos for child in node.children] + [node.end]
        if any(_NON_SPACE_RE.search(self.src, a, b) for a, b in zip(starts, ends, strict=True)):
            self.problem(who, "UNEXPECTED_TEXT", node.name)


def _check_operation(c: _Checker, node: Node, who: str) -> dict[str, str]:
    groups = _groups(node)
    values = c.fields(groups, OPERATION_TAGS, who, check=True)
    # An empty target counts as absent; a duplicated one has its DUPLICATE_TAG already.
    if all(_blank(values.get(t, "")) and len(groups.get(t, [])) < 2 for t in _TARGETS):
        c.problem(who, "MISSING_TARGET")
    c.unknown_children(node, OPERATION_TAGS, who)
    c.direct_text(node, who)
    return values


def _operation(v: dict[str, str]) -> Operation:
    note_id, path = (None if _blank(v.get(t, "")) else v[t] for t in _TARGETS)
    title, body, reason = v["title"], v["body_markdown"], v["reason"]
    return Operation(
        v["operation_id"], v["kind"], note_id, path, title, body, reason, float(v["confidence"])
    )


def _warnings(c: _Checker, node: Node) -> list[str]:
    """<warning> children and lines of text, in document order; blank ones dropped."""
    items: list[str] = []
    pos = node.start
    for child in node.children:
        items += map(_text, c.src[pos : child.pos].split("\n"))
        if child.name == "warning":
            items.append(c.value(child, "<warnings>"))
        else:
            c.unknown(child, "<warnings>", "warnings")
        pos = child.stop
    items += map(_text, c.src[pos : node.end].split("\n"))
    return [value for value in items if not _blank(value)]


def _check_response(c: _Checker, root: Node) -> LibrarianResponse:
    who = f"<{RESPONSE_ROOT}>"
    groups = _groups(root)
    values = c.fields(groups, _RESPONSE_FIELDS, who, check=True)
    ops_node = c.one(groups, "operations", who)
    warnings_node = c.one(groups, "warnings", who)
    c.unknown_children(root, _RESPONSE_TAGS, who)
    c.direct_text(root, who)
    operations = []
    if ops_node is not None:
        c.direct_text(ops_node, "<operations>")
        c.unknown_children(ops_node, ("operation",), "<operations>")
        blocks = _groups(ops_node).get("operation", [])
        operations = [_check_operation(c, op, f"operation[{i}]") for i, op in enumerate(blocks)]
    warnings = _warnings(c, warnings_node) if warnings_node is not None else []
    c.problems.raise_any(LIBRARIAN_PARSE_FAILED)
    return LibrarianResponse(
        **values,
        operations=tuple(map(_operation, operations)),
        warnings=tuple(warnings),
        parse_warnings=tuple(c.notes),
    )


# ------------------------------------------------------------------ entry points


_GUARD = guarded(LIBRARIAN_PROTOCOL_INVALID, "rewrite the envelope")


@_GUARD
def parse_response(text: str | bytes, *, strict: bool = False) -> LibrarianResponse:
    """Parse and validate a model's ``<librarian_response>`` (seed 002).

    Raises ``ProtocolError`` only: ``LIBRARIAN_PROTOCOL_INVALID`` for structure
    (the first problem, with line/column), ``LIBRARIAN_PARSE_FAILED`` with every
    semantic problem as a detail. ``strict`` turns what is otherwise tolerated
    into errors: a <think> block, a code fence, unknown tags, text in containers.
    """
    src, root, notes = read(text, RESPONSE_ROOT, lenient=not strict)
    return _check_response(_Checker(src, strict, notes), root)


@_GUARD
def parse_request(text: str | bytes) -> LibrarianRequest:
    """Read a ``<librarian_request>`` back (replay, the ``render`` command, round trips).

    Same tokenizer and codes as ``parse_response``; missing or duplicated tags
    are ``LIBRARIAN_PARSE_FAILED`` details, a source's prefixed ``source[i]:``.
    Unknown tags are ignored.
    """
    src, root, _ = read(text, REQUEST_ROOT, lenient=False)
    c = _Checker(src, False, [])
    who = f"<{REQUEST_ROOT}>"
    groups = _groups(root)
    fields = c.fields(groups, _REQUEST_FIELDS, who, check=False)
    bundle, taxonomy, limits = (
        c.one(groups, name, who) for name in ("source_bundle", "taxonomy", "constraints")
    )
    blocks = _groups(bundle).get("source", [])
    if bundle is not None and not blocks:
        c.problem("<source_bundle>", "MISSING_TAG", "source")
    sources = [
        c.fields(_groups(block), _SOURCE_TAGS, f"source[{i}]", check=False)
        for i, block in enumerate(blocks)
    ]
    c.problems.raise_any(LIBRARIAN_PARSE_FAILED)
    terms = [(n.name, c.value(n, who)) for n in (taxonomy.children if taxonomy else [])]
    return LibrarianRequest(
        **fields,
        sources=tuple(Source(**values) for values in sources),
        topics=tuple(v for name, v in terms if name == "topic"),
        sections=tuple(v for name, v in terms if name == "section"),
        constraints=tuple((n.name, c.value(n, who)) for n in (limits.children if limits else [])),
    )
