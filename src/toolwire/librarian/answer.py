"""The answer a librarian request expects: what the system knows, and what the model writes.

The scorer (``judge``) has decided each note's topic before the model is called, so
most of a ``<librarian_response>`` is known in advance: ids, kinds, the topic, the
reason (the evidence) and the confidence (calibrated). Only a few *slots* are the
model's to write: the title of an untitled note, and with ``judgement.decide: model``
the topic among the scorer's top candidates. An :class:`AnswerTemplate` is that
answer as literal text and slots. It serves three ways:

- a provider that fills templates (llama.cpp in process) feeds the literal text to
  the model in one batch and samples only the slots (jump-forward decoding); an
  answer without slots needs no decoding at all;
- a provider that takes a grammar gets the template as GBNF;
- whatever a model wrote, :func:`conform` keeps only its slot values: a placeholder
  or an invented confidence is never stored as if the model meant it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from toolwire.domain import AnswerSlot, AnswerTemplate, LibrarianResponse, Operation
from toolwire.gbnf import gbnf_literal
from toolwire.librarian.judge.scorer import Candidate, NoteJudgement
from toolwire.protocols.attrless import escape_text

__all__ = [
    "PlannedOperation",
    "conform",
    "derive_title",
    "file_name_title",
    "grounded_title",
    "plan_operations",
    "render_template",
    "template_gbnf",
]

TITLE_MAX_CHARS = 60
_WORD = re.compile(r"[^\W_]+")
# A title is one line of plain characters; < > & are excluded so nothing needs escaping.
_TITLE_GBNF = f"[^<>&\\n\\r \\t] [^<>&\\n\\r]{{0,{TITLE_MAX_CHARS - 1}}}"
_TITLE_MAX_TOKENS = 24


@dataclass(frozen=True, slots=True)
class PlannedOperation:
    """One operation of the answer; ``None`` fields are the model's slots."""

    operation_id: str
    kind: str
    target_note_id: str
    title: str | None
    body_markdown: str | None
    reason: str
    confidence: float
    choices: tuple[Candidate, ...] = ()  # the topics a model may pick from (decide: model)


def plan_operations(
    notes: Sequence[tuple[str, str]],
    judgements: Mapping[str, NoteJudgement],
    *,
    allowed_kinds: Sequence[str],
    decide: str,
    candidates: int,
    write_titles: bool,
    derived_titles: Mapping[str, str] | None = None,
) -> list[PlannedOperation]:
    """The operations for a request's notes ``(note_id, title)``, numbered op_1, op_2...

    ``derived_titles``: an untitled note's title taken from the note itself
    (:func:`derive_title`); without it, the title is the model's slot."""
    ops: list[PlannedOperation] = []

    def add(**fields: object) -> None:
        ops.append(PlannedOperation(operation_id=f"op_{len(ops) + 1}", **fields))  # type: ignore[arg-type]

    for note_id, title in notes:
        j = judgements.get(note_id)
        shown_title = title or "-"
        # The title first: a 135M model copies whatever text precedes its slot.
        derived = (derived_titles or {}).get(note_id, "")
        if not title and write_titles and "retitle_note" in allowed_kinds and derived:
            add(
                kind="retitle_note",
                target_note_id=note_id,
                title=derived,
                body_markdown="-",
                reason="untitled in a vault that titles notes by a title property: the "
                "title is the note's file name",
                confidence=1.0,
            )
        elif (
            not title
            and write_titles
            and "retitle_note" in allowed_kinds
            and (derived_titles is None)
        ):
            add(
                kind="retitle_note",
                target_note_id=note_id,
                title=None,
                body_markdown="-",
                reason="untitled: the model wrote a title from the note",
                confidence=1.0,
            )
        if j is not None and decide == "model" and "retag_note" in allowed_kinds:
            choices = tuple(j.candidates[:candidates])
            add(
                kind="retag_note",
                target_note_id=note_id,
                title=shown_title,
                body_markdown=None,
                reason="",
                confidence=0.0,
                choices=choices,
            )
        elif j is not None and j.decision == "retag" and "retag_note" in allowed_kinds:
            add(
                kind="retag_note",
                target_note_id=note_id,
                title=shown_title,
                body_markdown=j.best.topic,
                reason=j.why,
                confidence=j.best.confidence,
            )
        elif j is not None and j.decision == "defer" and "defer" in allowed_kinds:
            shown = "; ".join(c.evidence() for c in j.candidates[:candidates])
            add(
                kind="defer",
                target_note_id=note_id,
                title=shown_title,
                body_markdown="-",
                reason=f"{j.why}. Candidates: {shown}",
                confidence=j.best.confidence,
            )
    return ops


def _summary(ops: Sequence[PlannedOperation]) -> str:
    if not ops:
        return "no change: every note keeps its topic and title"
    kinds = [op.kind for op in ops]
    return ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))


def render_template(request_id: str, ops: Sequence[PlannedOperation]) -> AnswerTemplate:
    """The ``<librarian_response>`` of seed 002 with the model's slots left open."""
    parts: list[str | AnswerSlot] = []
    text = [
        "<librarian_response>\n<request_id>",
        escape_text(request_id),
        "</request_id>\n<status>ok</status>\n<summary>",
        escape_text(_summary(ops)),
        "</summary>\n<operations>\n",
    ]
    for op in ops:
        text.append(
            f"<operation>\n<operation_id>{op.operation_id}</operation_id>\n"
            f"<kind>{op.kind}</kind>\n<target_note_id>{escape_text(op.target_note_id)}"
            "</target_note_id>\n<title>"
        )
        if op.title is None:
            slot = AnswerSlot("title", _TITLE_GBNF, _TITLE_MAX_TOKENS, end="</title>")
            parts += ["".join(text), slot]
            text = ["\n<body_markdown>"]
        else:
            text.append(escape_text(op.title) + "</title>\n<body_markdown>")
        if op.body_markdown is None:
            enum = " | ".join(gbnf_literal(escape_text(c.topic)) for c in op.choices)
            parts += ["".join(text), AnswerSlot("topic", enum, 8, end="</body_markdown>")]
            text = ["\n"]
        else:
            text.append(escape_text(op.body_markdown) + "</body_markdown>\n")
        text.append(
            f"<reason>{escape_text(op.reason or '-')}</reason>\n"
            f"<confidence>{op.confidence:.2f}</confidence>\n</operation>\n"
        )
    text.append("</operations>\n<warnings></warnings>\n</librarian_response>")
    parts.append("".join(text))
    return tuple(p for p in parts if p != "")


def template_gbnf(template: AnswerTemplate) -> str:
    """The template as one GBNF grammar (for providers that take a grammar, not a template)."""
    root: list[str] = []
    rules: list[str] = []
    for i, part in enumerate(template):
        if isinstance(part, str):
            root.append(gbnf_literal(part))
        else:
            root.append(f"slot{i}")
            end = f" {gbnf_literal(part.end)}" if part.end else ""
            rules.append(f"slot{i} ::= ({part.gbnf}){end}")
    return "\n".join([f"root ::= {' '.join(root)}", *rules]) + "\n"


# Linear patterns only, on a line cut to _SCAN_CHARS first (issue 45 items 7-8: a lazy
# heading pattern took ~7 min on "## a", 8,000 spaces, "b"; 100,000 "[[" were quadratic
# in the link patterns). A title is 60 characters: the line's start is all it needs.
_SCAN_CHARS = 1024
_HEADING = re.compile(r"\s{0,3}#{1,6}(?:[ \t]+(.*)|[ \t]*$)")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# Lines that are not prose: table rows and rules, HTML comments and tags, link lists.
_NOT_PROSE = re.compile(r"^\s*(\||<|[-*_=]{3,}\s*$)")
# Markdown a title should not carry: list and quote markers, emphasis, code ticks, and
# links reduced to their text ([text](url), [[target|text]]).
_LEAD = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_LINK = re.compile(r"!?\[([^\[\]]{0,256})\]\([^()]{0,1024}\)")
_WIKI = re.compile(r"\[\[(?:[^\[\]|]{0,256}\|)?([^\[\]]{0,256})\]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|[:;]\s")
# Terminal escape sequences (CSI, OSC such as an OSC 8 link, other ESC pairs), then any
# control or bidi-format character left: a title is plain text (issue 45 item 13: a
# first sentence's escapes were written, stored and printed raw, clearing the screen).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|\x1b[@-_]?"
    r"|\x9b[0-?]{0,64}[ -/]{0,16}[@-~]|\x9d[^\x07\x1b\x9c]{0,4096}[\x07\x9c]?"
)
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _plain(line: str) -> str:
    line = _UNPRINTABLE.sub(" ", _ESCAPES.sub("", line))
    line = _WIKI.sub(r"\1", _LINK.sub(r"\1", line))
    line = re.sub(r"[*_`<>&]+", "", line)
    return " ".join(line.split())


def _heading_text(line: str) -> str | None:
    """An ATX heading's text without its closing ``#`` run (CommonMark: the run must
    follow a space), or None when ``line`` is no heading. Linear: no lazy group."""
    m = _HEADING.match(line)
    if m is None:
        return None
    text = (m.group(1) or "").rstrip()
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip()
    return text


def derive_title(body: str, max_chars: int = TITLE_MAX_CHARS) -> str:
    """A title from the note itself: the first sentence of its first line of prose, in
    plain text, cut at a clause or word under ``max_chars``; the first heading when the
    note has no prose; "" when it has no words. Grounded by construction.

    Sentence before heading, by measurement: on 130 titled notes (data/notes and the
    shared runbooks) with their title hidden, the first sentence shared words with the
    real title in 70 % (mean token F1 0.26); the first heading in 8 % (0.02): headings
    name sections ("Meaning", "January"), not the note (bench figure 6)."""
    in_fence = False
    first_heading = ""
    for whole in body.splitlines():
        raw = whole[:_SCAN_CHARS]
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence or not raw.strip() or _NOT_PROSE.match(raw):
            continue
        heading = _heading_text(raw)
        if heading is not None:
            first_heading = first_heading or _plain(heading).strip(" .:")
            continue
        sentence = _SENTENCE_END.split(_plain(_LEAD.sub("", raw)), maxsplit=1)[0]
        sentence = sentence.strip(" .:;,-")
        if _WORD.search(sentence):
            return _cut(sentence, max_chars)
    return _cut(first_heading, max_chars) if _WORD.search(first_heading) else ""


def _cut(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``: at the end of a clause when one ends past a third
    of the room (a comma, a dash, a parenthesis), else at the last whole word."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars + 1]
    clause = max(head.rfind(", "), head.rfind(" - "), head.rfind(" ("))
    if clause >= max_chars // 3:
        return head[:clause].rstrip(" ,;:-")
    cut = head.rsplit(" ", 1)[0] if " " in head[:max_chars] else text[:max_chars]
    words = cut.rstrip(" ,;:-").split(" ")
    # A cut mid-clause leaves a dangling "from" or "the" ("brings the tunnel up from"):
    # drop such words from the end, never the whole title.
    while len(words) > 1 and words[-1].lower() in _DANGLING:
        words.pop()
    return " ".join(words).rstrip(" ,;:-")


# Words a title should not end on once cut: articles, prepositions, conjunctions.
_DANGLING = frozenset(
    "a an the and or but nor of to in on at by for from with into onto over under "
    "than as that which who whose when where while if so via per".split()
)


def file_name_title(path: str, note_text: str) -> str:
    """The title a note's file name gives (``wireguard-tunnel.md`` -> "Wireguard tunnel"),
    if it is about the note (:func:`grounded_title`), else "" (issue 42: a title cut from
    the first sentence, "In some jurisdictions" for *Sales tax*, is not a title)."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    words = re.sub(r"[-_]+", " ", stem).split()
    title = " ".join(words)[:TITLE_MAX_CHARS].strip()
    if not title or not grounded_title(title, note_text):
        return ""
    return title[0].upper() + title[1:] if title.islower() else title


def grounded_title(title: str, note_text: str) -> bool:
    """A title is the model's only if it is about the note: most of its words (3+
    letters) occur in the note. A copied placeholder ("NOTE_TITLE", "Title of the
    note") or an echo of the prompt fails, and the note stays untitled."""
    words = [w for w in _WORD.findall(title.lower()) if len(w) >= 3]
    if not words:
        return False
    vocabulary = set(_WORD.findall(note_text.lower()))
    return sum(w in vocabulary for w in words) * 2 > len(words)


def conform(
    response: LibrarianResponse,
    ops: Sequence[PlannedOperation],
    texts: Mapping[str, str] | None = None,
) -> LibrarianResponse:
    """The planned operations, with the model's values taken for the slots only.

    A slot the model left out (or filled with a topic that was not offered) drops that
    operation; everything else comes from the plan, whatever the model wrote there.
    """
    texts = texts or {}
    written = {op.operation_id: op for op in response.operations}
    out: list[Operation] = []
    for planned in ops:
        model_op = written.get(planned.operation_id)
        title = planned.title
        body = planned.body_markdown
        reason, confidence = planned.reason, planned.confidence
        if title is None:
            if model_op is None or not grounded_title(
                model_op.title, texts.get(planned.target_note_id, "")
            ):
                continue  # no title, or a placeholder: the note stays untitled
            title = model_op.title.strip()
        if body is None:
            chosen = model_op.body_markdown.strip() if model_op is not None else ""
            pick = next((c for c in planned.choices if c.topic == chosen), None)
            if pick is None:
                continue
            body, confidence = pick.topic, pick.confidence
            reason = f"the model chose {pick.evidence()}"
        out.append(
            Operation(
                operation_id=planned.operation_id,
                kind=planned.kind,
                target_note_id=planned.target_note_id,
                target_path=None,
                title=title if title != "-" else "",
                body_markdown=body,
                reason=reason,
                confidence=confidence,
            )
        )
    return replace(response, operations=tuple(out))
