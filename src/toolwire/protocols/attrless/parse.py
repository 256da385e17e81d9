"""Seed 002's envelopes read back: ``parse_response`` (a model's answer) and
``parse_request`` (replay, the ``render`` command, round trips).

Structure first: the tag-stack scanner raises ``LIBRARIAN_PROTOCOL_INVALID`` at
the first problem, with line and column. Then every semantic problem is
collected as a detail code in one ``LIBRARIAN_PARSE_FAILED``. Nothing but
``ProtocolError`` leaves, whatever the text.
"""

from __future__ import annotations

import re

from toolwire.domain import OPERATION_KINDS, RESPONSE_STATUSES, LibrarianResponse, Operation
from toolwire.errors import LIBRARIAN_PARSE_FAILED, LIBRARIAN_PROTOCOL_INVALID
from toolwire.protocols.attrless.render import (
    OPERATION_TAGS,
    REQUEST_ROOT,
    RESPONSE_ROOT,
    LibrarianRequest,
    Source,
)
from toolwire.protocols.attrless.scanner import Node, check_characters, scan
from toolwire.protocols.text import (
    Lines,
    Problems,
    fenced_span,
    guarded,
    reply_text,
    skip_blanks,
    unescape_text,
)

__all__ = ["parse_request", "parse_response"]

_TARGETS = ("target_note_id", "target_path")  # one of them is required, either may be absent
_RESPONSE_SET = frozenset(("request_id", "status", "summary", "operations", "warnings"))
_OPERATION_SET = frozenset(OPERATION_TAGS)
_SOURCE_TAGS = ("source_id", "title", "body_markdown", "kind")
_KINDS = frozenset(OPERATION_KINDS)
_STATUSES = frozenset(RESPONSE_STATUSES)
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


def _field(raw: str) -> str:
    """A field's value: surrounding whitespace stripped, then entities decoded."""
    raw = raw.strip(_WS)
    return unescape_text(raw) if "&" in raw else raw


def _block(raw: str) -> str:
    """A body keeps its whitespace; only one newline after the open tag and one
    before the close tag belong to the layout."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return unescape_text(raw) if "&" in raw else raw


def _blank(value: str) -> bool:
    return not value.strip(_WS)


def _confidence(value: str) -> float | str:
    """The confidence as a float, or the detail code saying why it is not one."""
    m = _CONFIDENCE_RE.match(value)
    if m is None or not (m.group(1) or m.group(2)):
        return "INVALID_CONFIDENCE"
    # Range-check the digits, not the float: exact, and no int() of a huge string.
    whole, frac = m.group(1).lstrip("0"), m.group(2) or ""
    if whole and (whole != "1" or frac.strip("0")):
        return "INVALID_CONFIDENCE_RANGE"
    return float(value)


def _warning_items(parts: list[str]) -> list[str]:
    """Alternating text / <warning> contents -> non-empty lines and non-empty warnings."""
    items: list[str] = []
    for n, part in enumerate(parts):
        for line in (part,) if n % 2 else part.split("\n"):
            value = _field(line)
            if not _blank(value):
                items.append(value)
    return items


# ------------------------------------------------------------------ parsing


def _prepare(text: str | bytes) -> str:
    """UTF-8 text within the size bound, line endings normalised to ``\\n`` (seed
    rule), free of characters XML 1.0 forbids."""
    text = reply_text(text, LIBRARIAN_PROTOCOL_INVALID)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    check_characters(text)
    return text


def _window(src: str, strict: bool) -> tuple[int, int, list[str]]:
    """The span to tokenize. Outside strict mode a leading <think> block and a
    markdown code fence around the envelope are skipped, and noted."""
    notes: list[str] = []
    lo, hi = 0, len(src)
    if strict:
        return lo, hi, notes
    lo = skip_blanks(src)
    if src.startswith("<think>", lo):
        close = src.find("</think>", lo)
        if close >= 0:
            notes.append("dropped a leading <think> block")
            lo = skip_blanks(src, close + len("</think>"))
    span = fenced_span(src, lo)
    if span is not None:
        notes.append("removed a markdown code fence around the response")
        lo, hi = span
    return lo, hi, notes


def _index(node: Node, known: frozenset[str]) -> tuple[dict[str, Node], set[str], list[Node]]:
    """Known children by name (the first one), names seen twice, unknown children."""
    found: dict[str, Node] = {}
    dups: set[str] = set()
    unknown: list[Node] = []
    for child in node.children:
        name = child.name
        if name not in known:
            unknown.append(child)
        elif name in found:
            dups.add(name)
        else:
            found[name] = child
    return found, dups, unknown


class _Checker:
    """The general path's semantic checks: collects every problem (detail code and a
    line for the model) and the parse warnings for tolerated deviations."""

    def __init__(self, src: str, strict: bool, notes: list[str]) -> None:
        self.src = src
        self.positions = Lines(src)
        self.strict = strict
        self.notes = notes
        self.problems = Problems()

    def problem(self, p: str, who: str, code: str, tag: str = "", value: str = "") -> None:
        detail = f"{p}{code}:{tag}" if tag else f"{p}{code}"
        if detail not in self.problems.details:
            self.problems.add(detail, _MESSAGES[code].format(who=who, tag=tag, value=value))

    def raise_problems(self) -> None:
        """Every semantic problem at once, one line each for the model."""
        self.problems.raise_any(LIBRARIAN_PARSE_FAILED)

    def where(self, node: Node) -> str:
        line, col = self.positions.at(node.pos)
        return f"line {line}, column {col}"

    def single(
        self,
        fd: tuple[dict[str, Node], set[str]],
        name: str,
        p: str,
        who: str,
        required: bool = True,
    ) -> Node | None:
        """The one <name> child, or None after recording it as duplicated or missing."""
        found, dups = fd
        if name in dups:
            self.problem(p, who, "DUPLICATE_TAG", name)
            return None
        node = found.get(name)
        if node is None and required:
            self.problem(p, who, "MISSING_TAG", name)
        return node

    def value(self, node: Node, p: str, who: str, block: bool = False) -> str:
        """A field's value; tags nested in a field are kept as text (strict: an error)."""
        for inner in node.children:
            self.unknown(inner, p, who, node.name, kept=True)
        raw = self.src[node.start : node.end]
        return _block(raw) if block else _field(raw)

    def unknown(self, node: Node, p: str, who: str, parent: str, kept: bool = False) -> None:
        if self.strict:
            self.problem(p, who, "UNKNOWN_TAG", node.name, self.where(node))
        else:
            tag, where = f"<{node.name}> inside <{parent}>", self.where(node)
            if kept:
                self.notes.append(f"kept tag {tag} as text ({where})")
            else:
                self.notes.append(f"ignored unknown tag {tag} ({where})")

    def direct_text(self, node: Node, p: str, who: str) -> None:
        """Strict mode only: text directly inside a container tag is an error."""
        if not self.strict:
            return
        pos, search = node.start, _NON_SPACE_RE.search
        for child in node.children:
            if search(self.src, pos, child.pos) is not None:
                break
            pos = child.stop
        else:
            if search(self.src, pos, node.end) is None:
                return
        self.problem(p, who, "UNEXPECTED_TEXT", node.name)


def _check_operation(c: _Checker, node: Node, i: int) -> Operation | None:
    p, who = f"operation[{i}]:", f"operation[{i}]"
    found, dups, unknown = _index(node, _OPERATION_SET)
    values: dict[str, str | None] = {}
    score: float | str = 0.0
    before = len(c.problems.details)
    for name in OPERATION_TAGS:
        is_target = name in _TARGETS
        child = c.single((found, dups), name, p, who, required=not is_target)
        value = None if child is None else c.value(child, p, who, name == "body_markdown")
        if value is not None and _blank(value):
            value = None  # an empty target counts as absent: MISSING_TARGET below
            if not is_target:
                c.problem(p, who, "EMPTY_TAG", name)
        values[name] = value
        if value is None:
            continue
        if name == "kind" and value not in _KINDS:
            c.problem(p, who, "INVALID_KIND", value=_show(value))
        elif name == "confidence":
            score = _confidence(value)
            if isinstance(score, str):
                c.problem(p, who, score, value=_show(value))
    if values["target_note_id"] is None and values["target_path"] is None:
        if not (dups & set(_TARGETS)):
            c.problem(p, who, "MISSING_TARGET")
    for child in unknown:
        c.unknown(child, p, who, "operation")
    c.direct_text(node, p, who)
    if len(c.problems.details) > before or isinstance(score, str):
        return None
    v = {k: x or "" for k, x in values.items()}
    return Operation(
        v["operation_id"],
        v["kind"],
        values["target_note_id"],
        values["target_path"],
        v["title"],
        v["body_markdown"],
        v["reason"],
        score,
    )


def _show(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


def _check_response(c: _Checker, root: Node) -> LibrarianResponse:
    found, dups, unknown = _index(root, _RESPONSE_SET)
    who = f"<{RESPONSE_ROOT}>"
    values: dict[str, str] = {}
    for name in ("request_id", "status", "summary"):
        child = c.single((found, dups), name, "", who)
        if child is not None:
            values[name] = value = c.value(child, "", who)
            if _blank(value):
                c.problem("", who, "EMPTY_TAG", name)
            elif name == "status" and value not in _STATUSES:
                c.problem("", who, "INVALID_STATUS", value=_show(value))
    ops_node = c.single((found, dups), "operations", "", who)
    warnings_node = c.single((found, dups), "warnings", "", who)
    for child in unknown:
        c.unknown(child, "", who, RESPONSE_ROOT)
    c.direct_text(root, "", who)
    operations: list[Operation] = []
    if ops_node is not None:
        c.direct_text(ops_node, "", "<operations>")
        blocks = [n for n in ops_node.children if n.name == "operation"]
        for child in ops_node.children:
            if child.name != "operation":
                c.unknown(child, "", "<operations>", "operations")
        for i, block in enumerate(blocks):
            op = _check_operation(c, block, i)
            if op is not None:
                operations.append(op)
    warnings: list[str] = []
    if warnings_node is not None:
        parts, pos = [], warnings_node.start
        for child in warnings_node.children:
            if child.name == "warning":  # raw: _warning_items strips and decodes it
                for inner in child.children:
                    c.unknown(inner, "", "<warnings>", "warning", kept=True)
                parts += [c.src[pos : child.pos], c.src[child.start : child.end]]
            else:
                parts += [c.src[pos : child.pos], ""]
                c.unknown(child, "", "<warnings>", "warnings")
            pos = child.stop
        parts.append(c.src[pos : warnings_node.end])
        warnings = _warning_items(parts)
    c.raise_problems()
    return LibrarianResponse(
        values["request_id"],
        values["status"],
        values["summary"],
        tuple(operations),
        tuple(warnings),
        tuple(c.notes),
    )


_GUARD = guarded(LIBRARIAN_PROTOCOL_INVALID, "rewrite the envelope")


@_GUARD
def parse_response(text: str | bytes, *, strict: bool = False) -> LibrarianResponse:
    """Parse and validate a model's ``<librarian_response>`` (seed 002).

    Raises ``ProtocolError`` only: ``LIBRARIAN_PROTOCOL_INVALID`` for structure
    (the first problem, with line/column), ``LIBRARIAN_PARSE_FAILED`` with every
    semantic problem as a detail. ``strict`` turns what is otherwise tolerated
    into errors: a <think> block, a code fence, unknown tags, text in containers.
    """
    src = _prepare(text)
    lo, hi, notes = _window(src, strict)
    root = scan(src, lo, hi, RESPONSE_ROOT)
    return _check_response(_Checker(src, strict, notes), root)


def _request_fields(c: _Checker, node: Node, tags: tuple[str, ...], p: str) -> dict[str, str]:
    found, dups, _ = _index(node, frozenset(tags))
    who = p[:-1] if p else f"<{node.name}>"
    values: dict[str, str] = {}
    for name in tags:
        child = c.single((found, dups), name, p, who)
        if child is not None:
            values[name] = c.value(child, p, who, name == "body_markdown")
    return values


@_GUARD
def parse_request(text: str | bytes) -> LibrarianRequest:
    """Read a ``<librarian_request>`` back (replay, the ``render`` command, round trips).

    Same tokenizer and codes as ``parse_response``; missing or duplicated tags
    are ``LIBRARIAN_PARSE_FAILED`` details, a source's prefixed ``source[i]:``.
    """
    src = _prepare(text)
    root = scan(src, 0, len(src), REQUEST_ROOT)
    c = _Checker(src, False, [])
    fields = _request_fields(c, root, ("request_id", "goal", "scope", "output_contract"), "")
    known = frozenset(("source_bundle", "taxonomy", "constraints"))
    found, dups, _ = _index(root, known)
    who = f"<{REQUEST_ROOT}>"
    bundle, taxonomy, limits = (
        c.single((found, dups), n, "", who) for n in ("source_bundle", "taxonomy", "constraints")
    )
    sources: list[Source] = []
    blocks = [n for n in bundle.children if n.name == "source"] if bundle else []
    if bundle is not None and not blocks:
        c.problem("", "<source_bundle>", "MISSING_TAG", "source")
    for i, block in enumerate(blocks):
        v = _request_fields(c, block, _SOURCE_TAGS, f"source[{i}]:")
        if len(v) == len(_SOURCE_TAGS):
            sources.append(Source(v["source_id"], v["title"], v["body_markdown"], v["kind"]))
    terms = [(n.name, c.value(n, "", "")) for n in (taxonomy.children if taxonomy else [])]
    pairs = [(n.name, c.value(n, "", "")) for n in (limits.children if limits else [])]
    c.raise_problems()
    return LibrarianRequest(
        request_id=fields["request_id"],
        goal=fields["goal"],
        scope=fields["scope"],
        sources=tuple(sources),
        topics=tuple(v for n, v in terms if n == "topic"),
        sections=tuple(v for n, v in terms if n == "section"),
        constraints=tuple(pairs),
        output_contract=fields["output_contract"],
    )
