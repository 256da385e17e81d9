"""The GBNF grammar of seed 002's ``<librarian_response>`` for one request.

``librarian_grammar`` admits only a well-formed response: the fixed tags, the
request id and the operation ids are literals the model cannot get wrong, and
every free-text field is bounded so the answer fits a small ``max_tokens``. A
small model then spends its few good decisions on what matters (kind, topic)
instead of on XML syntax.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from toolwire.domain import OPERATION_KINDS
from toolwire.gbnf import Rules, gbnf_literal, rule_name
from toolwire.protocols.text import escape_text

__all__ = ["estimate_answer_tokens", "librarian_grammar"]

# Printable ASCII minus the three characters escape_text rewrites (& < >).
# ASCII only, so one character is never more than one token: that keeps the
# length bounds below honest bounds on tokens too.
_TEXT_CHAR = "[ -%'-;=?-~]"
_TEXT_HEAD = "[!-%'-;=?-~]"  # the same without the space: fields never start blank
_PATH_CHAR = "[A-Za-z0-9_./-]"

# Kinds whose body is a fixed placeholder: the operation says everything in
# its other fields (retitle: the new title; defer: the reason).
_DASH_BODY_KINDS = frozenset({"retitle_note", "defer"})
_FREE_BODY_LINES = 8  # create/rewrite/relink bodies: up to 8 lines of text

# Token costs for sizing an answer to max_tokens, measured with SmolLM2's tokenizer on
# real envelopes: tags ~2.6 chars/token; ids one token per hex digit at worst; English
# ~5 chars/token, but a small model stuck repeating "SURPRISES_" or "SURFACE_TITLE"
# writes 1.6-1.7 (counted at 4, it ran past max_tokens three attempts running).
_TAG_CHARS_PER_TOKEN = 2.6
_ID_CHARS_PER_TOKEN = 1.0
_TEXT_CHARS_PER_TOKEN = 1.5
_MIN_TEXT_CHARS = 16  # below this a title or reason says nothing
_TEXT_BOUNDS = ("title_max_chars", "summary_max_chars", "reason_max_chars")  # what a budget cuts
_ENVELOPE_TAGS = (
    "<librarian_response>\n<request_id></request_id>\n<status>ok</status>\n<summary></summary>\n"
    "<operations>\n</operations>\n<warnings></warnings>\n</librarian_response>"
)
_OPERATION_TAGS = (
    "<operation>\n<operation_id>op_1</operation_id>\n<kind></kind>\n<target_note_id>"
    "</target_note_id>\n<title></title>\n<body_markdown></body_markdown>\n<reason></reason>\n"
    "<confidence>0.00</confidence>\n</operation>\n"
)


def librarian_grammar(
    *,
    request_id: str,
    note_ids: Sequence[str],
    topics: Sequence[str],
    allowed_kinds: Sequence[str],
    max_operations: int,
    title_max_chars: int = 80,
    summary_max_chars: int = 120,
    reason_max_chars: int = 100,
    max_topics_per_note: int = 2,
    max_tokens: int | None = None,
) -> str:
    """GBNF admitting only a valid ``<librarian_response>`` (seed 002) for one request.

    Status is fixed to ``ok``, warnings to empty, and there are 1 to
    ``min(max_operations, 2)`` operations numbered ``op_1``, ``op_2``.
    ``retag_note`` bodies are 1 to ``max_topics_per_note`` taxonomy topics,
    one per line; ``retitle_note`` and ``defer`` bodies are ``-``.
    With ``max_tokens``, fewer operations and shorter text fields are allowed until
    the longest answer's estimate fits (a cut-off answer never parses).
    Raises ValueError when a set is empty, a value cannot appear in the envelope,
    or even one operation with short fields cannot fit ``max_tokens``.
    """
    ids = _unique("note_ids", note_ids)
    topic_values = _unique("topics", topics)
    kinds = _unique("allowed_kinds", allowed_kinds)
    unknown = [k for k in kinds if k not in OPERATION_KINDS]
    if unknown:
        raise ValueError(f"unknown operation kinds {unknown}; known: {list(OPERATION_KINDS)}")
    named = [("note id", i) for i in ids] + [("topic", t) for t in topic_values]
    for name, value in [("request_id", request_id), *named]:
        if not value.strip() or "\n" in value or "\r" in value:
            raise ValueError(f"{name} {value!r} must be non-blank and on one line")
    for name, bound in (
        ("max_operations", max_operations),
        ("title_max_chars", title_max_chars),
        ("summary_max_chars", summary_max_chars),
        ("reason_max_chars", reason_max_chars),
        ("max_topics_per_note", max_topics_per_note),
    ):
        if bound < 1:
            raise ValueError(f"{name} must be >= 1, got {bound}")

    n_ops = min(max_operations, 2)
    if max_tokens is not None:
        request: dict[str, Any] = dict(
            request_id=request_id,
            note_ids=ids,
            topics=topic_values,
            allowed_kinds=kinds,
            max_topics_per_note=max_topics_per_note,
        )
        bounds = [title_max_chars, summary_max_chars, reason_max_chars]
        n_ops, bounds = _fit_budget(max_tokens, n_ops, bounds, request)
        title_max_chars, summary_max_chars, reason_max_chars = bounds
    rules = Rules()
    op_end = gbnf_literal("</operation>\n")
    for i in range(1, n_ops + 1):
        op_head = gbnf_literal(f"<operation>\n<operation_id>op_{i}</operation_id>\n")
        rules.add(f"op-{i}", f"{op_head} op-fields {op_end}")
    rules.add("op-fields", " | ".join(f"op-{rule_name(k)}" for k in kinds))
    for kind in kinds:
        rules.add(f"op-{rule_name(kind)}", _operation_rule(kind))
    note = gbnf_literal("<target_note_id>"), gbnf_literal("</target_note_id>\n")
    rules.add("target-note", f"{note[0]} note-id {note[1]}")
    rules.add("note-id", _enum(escape_text(i) for i in ids))
    rules.add("topic", _enum(escape_text(t) for t in topic_values))
    rules.add("topic-lines", "topic" + _repeat(' "\\n" topic', max_topics_per_note - 1))
    reason, confidence = gbnf_literal("</reason>\n<confidence>"), gbnf_literal("</confidence>\n")
    rules.add("tail", f"{gbnf_literal('<reason>')} reason {reason} confidence {confidence}")
    rules.add("summary", _bounded_text(summary_max_chars))
    rules.add("title", _bounded_text(title_max_chars))
    rules.add("reason", _bounded_text(reason_max_chars))
    # Seed 002: a decimal in [0.0, 1.0]; two digits are all a score needs.
    rules.add("confidence", '"0." [0-9] [0-9]? | "1.0"')
    rules.add("text-head", _TEXT_HEAD)
    rules.add("text-char", _TEXT_CHAR)
    if any(k not in _DASH_BODY_KINDS and k != "retag_note" for k in kinds):
        rules.add("free-line", _bounded_text(title_max_chars))
        lines = _repeat(' "\\n" free-line', _FREE_BODY_LINES - 1)
        rules.add("free-body", "free-line" + lines)
    if "create_note" in kinds:
        rules.add("path", f'{_PATH_CHAR}{{1,{title_max_chars}}} ".md"')
    head = gbnf_literal(
        f"<librarian_response>\n<request_id>{escape_text(request_id)}</request_id>\n"
        "<status>ok</status>\n<summary>"
    )
    ops = " ".join(f"op-{i}" if i == 1 else f"op-{i}?" for i in range(1, n_ops + 1))
    middle = gbnf_literal("</summary>\n<operations>\n")
    tail = gbnf_literal("</operations>\n<warnings></warnings>\n</librarian_response>")
    return rules.text(f"{head} summary {middle} {ops} {tail}")


def estimate_answer_tokens(
    *,
    request_id: str,
    note_ids: Sequence[str],
    topics: Sequence[str],
    allowed_kinds: Sequence[str],
    n_operations: int,
    title_max_chars: int = 80,
    summary_max_chars: int = 120,
    reason_max_chars: int = 100,
    max_topics_per_note: int = 2,
) -> int:
    """Estimated tokens of the longest answer the grammar admits (SmolLM2's tokenizer)."""
    text = summary_max_chars + n_operations * (title_max_chars + reason_max_chars)
    ids = len(escape_text(request_id)) + n_operations * max(len(escape_text(i)) for i in note_ids)
    longest_body = 1
    for kind in allowed_kinds:
        if kind == "retag_note":
            topic = max(len(escape_text(t)) for t in topics)
            longest_body = max(longest_body, max_topics_per_note * (topic + 1))
        elif kind not in _DASH_BODY_KINDS:
            text += n_operations * _FREE_BODY_LINES * (title_max_chars + 1)
    tags = len(_ENVELOPE_TAGS) + n_operations * (
        len(_OPERATION_TAGS) + max(len(k) for k in allowed_kinds) + longest_body
    )
    estimate = (
        tags / _TAG_CHARS_PER_TOKEN + ids / _ID_CHARS_PER_TOKEN + text / _TEXT_CHARS_PER_TOKEN
    )
    return math.ceil(estimate)


def _fit_budget(
    max_tokens: int, n_ops: int, bounds: list[int], request: dict[str, Any]
) -> tuple[int, list[int]]:
    """Operations and (title, summary, reason) bounds whose longest answer fits max_tokens."""

    def cost(n: int, b: list[int]) -> int:
        sizes: dict[str, Any] = dict(zip(_TEXT_BOUNDS, b, strict=True))
        return estimate_answer_tokens(**request, **sizes, n_operations=n)

    # Fewer operations first: one well-formed operation beats two cut-off ones.
    for n in range(n_ops, 0, -1):
        if cost(n, bounds) <= max_tokens:
            return n, bounds
    # Then shorter text, all three fields by the same factor, never below a floor: the
    # largest factor that fits, searched (free-text bodies grow with the title bound).
    floor = [min(b, _MIN_TEXT_CHARS) for b in bounds]

    def shrunk(scale: float) -> list[int]:
        return [max(f, int(b * scale)) for f, b in zip(floor, bounds, strict=True)]

    if cost(1, floor) > max_tokens:
        raise ValueError(
            f"max_tokens={max_tokens} cannot hold one operation: the shortest answer "
            f"needs about {cost(1, floor)} tokens"
        )
    low, high = 0.0, 1.0
    for _ in range(20):
        mid = (low + high) / 2
        low, high = (mid, high) if cost(1, shrunk(mid)) <= max_tokens else (low, mid)
    return 1, shrunk(low)


def _operation_rule(kind: str) -> str:
    """The fields of one operation of ``kind``, in seed 002's tag order."""
    if kind == "create_note":
        target = gbnf_literal("<target_path>") + " path " + gbnf_literal("</target_path>\n")
    else:
        target = "target-note"
    if kind == "retag_note":
        body = "topic-lines"
    elif kind in _DASH_BODY_KINDS:
        body = gbnf_literal("-")
    else:
        body = "free-body"
    head = gbnf_literal(f"<kind>{kind}</kind>\n")
    title = gbnf_literal("<title>") + " title " + gbnf_literal("</title>\n<body_markdown>")
    body_close = gbnf_literal("</body_markdown>\n")
    return f"{head} {target} {title} {body} {body_close} tail"


def _bounded_text(max_chars: int) -> str:
    """One line of 1..max_chars safe characters, not starting with a space."""
    return "text-head" + (f" text-char{{0,{max_chars - 1}}}" if max_chars > 1 else "")


def _repeat(item: str, most: int) -> str:
    """`` (item){0,most}``, or nothing when most is 0 (GBNF has no empty group)."""
    return f" ({item.strip()}){{0,{most}}}" if most > 0 else ""


def _enum(values: Iterable[str]) -> str:
    return " | ".join(gbnf_literal(v) for v in values)


def _unique(name: str, values: Sequence[str]) -> list[str]:
    """Values in first-seen order without duplicates; ValueError when none."""
    if isinstance(values, str):
        raise ValueError(f"{name} must be a sequence of strings, not a string")
    out = list(dict.fromkeys(values))
    if not out:
        raise ValueError(f"{name} must not be empty")
    if any(not isinstance(v, str) or v == "" for v in out):
        raise ValueError(f"{name} must hold non-empty strings")
    return out
