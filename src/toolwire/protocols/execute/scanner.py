"""The wire side of seed 000's ``execute`` transport: one pass over a whole reply.

``Scanner`` finds a reply's structure: ``<think>`` blocks (skipped), answer text,
the ``<execute>`` block with its tool elements and their argument values
(text, entities, CDATA), or its JSON array (decoded whole). A structural problem raises
``ProtocolError(EXECUTE_INVALID)`` at its first occurrence, with line and
column; ``parse.py`` gives the calls their meaning (tools, schemas, typed values).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import ProtocolError
from toolwire.protocols.text import (
    located_error,
    lone_surrogate,
    reject_constant,
    skip_blanks,
    unescape_text,
)

__all__ = ["EXEC_CLOSE_RE", "EXECUTE_INVALID", "RawCall", "Scanner"]

EXECUTE_INVALID = "EXECUTE_INVALID"  # errors.py holds no constant for seed 000 yet

WS = " \t\r\n"
NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*+"
# A tag is at most 256 characters past its name; longer is text.
TAG_RE = re.compile(rf"<(/?)({NAME})([^<>]{{0,256}})>")
PARTIAL_TAG_RE = re.compile(rf"</?(?:{NAME}[^<>]{{0,256}})?\Z")  # a tag cut off by the end
# The only tags read outside the block (TAG_RE for these three names).
OUTSIDE_TAG_RE = re.compile(r"<(/?)(think|execute|results)(?![A-Za-z0-9_.\-])([^<>]{0,256})>")
# In an argument, the next "<" that may open a tag, CDATA or markup: "a < b" is text.
OPENER_RE = re.compile(r"<[A-Za-z_/!?]")
CDATA = "<![CDATA["
EXEC_CLOSE_RE = re.compile(r"</execute[ \t\r\n]*+>")
# The JSON form up to the first </execute> outside a JSON string (one inside is text).
# Possessive throughout: nothing backtracks, so a reply of 10 MB costs one pass.
JSON_BODY_RE = re.compile(r'(?:[^"<]++|"(?:[^"\\]++|\\.)*+"|<(?!/execute[ \t\r\n]*+>))*+', re.S)
LAYOUT_HEAD_RE = re.compile(r"\r?\n")
LAYOUT_TAIL_RE = re.compile(r"\r?\n[ \t]*+\Z")

EMPTY = "calls no tool: put at least one call in it, or leave it out and write your answer."
ATTRS_EXECUTE = "Tag <execute ...> {at} has attributes; this protocol uses none: remove them."
ATTRS_CALL = (
    "Tag <{tag} ...> {{at}} has attributes; this protocol uses none: write each argument as "
    "an element, <tool><arg>value</arg></tool>."
)
MARKUP = (
    ("<!--", "a comment <!--"),
    ("<![CDATA[", "a CDATA section outside an argument"),
    ("<?", "a processing instruction <?"),
)
TEXT_IN_EXECUTE = (
    "Text {at} is inside <execute> but outside any call: put only tool elements, or one JSON "
    "array, in the block."
)
SAFE = (
    " A value holding markup (HTML, XML, </execute>) goes inside <![CDATA[ ... ]]>, or escape"
    " < as &lt; and > as &gt;."
)
JSON_SHAPE = 'Write [{"name": "tool", "args": {"argument": value}}, ...].'
CLOSE_EXECUTE = "end the block with </execute>."
CUT = " The reply was cut off at the token limit: write less (fewer calls, shorter values)."


@dataclass(slots=True)
class RawCall:
    """A tool element as written: its name, position, index in the block, raw arguments."""

    name: str
    pos: int
    index: int
    args: list[tuple[str, int, str]] = field(default_factory=list)  # (name, pos, value text)


def _value_text(pieces: list[tuple[bool, str]]) -> str:
    """An argument's text from its (is CDATA, text) runs: entities decoded outside CDATA.

    A value that is one CDATA section (with only whitespace around it) is that
    section's text exactly. Otherwise one newline after the opening tag and one
    newline plus the closing tag's indentation are layout, not value.
    """
    cdata = [text for is_cdata, text in pieces if is_cdata]
    if len(cdata) == 1 and all(is_cdata or not text.strip(WS) for is_cdata, text in pieces):
        return cdata[0]
    parts = [text for _, text in pieces]
    if parts and not pieces[0][0]:
        head = LAYOUT_HEAD_RE.match(parts[0])
        if head is not None:
            parts[0] = parts[0][head.end() :]
    if parts and not pieces[-1][0]:
        parts[-1] = LAYOUT_TAIL_RE.sub("", parts[-1], count=1)
    return "".join(
        text if is_cdata else unescape_text(text)
        for (is_cdata, _), text in zip(pieces, parts, strict=True)
    )


class Scanner:
    """Reads ``buf`` once (``read``); then its fields hold what the reply holds."""

    def __init__(self, text: str, finish_reason: str) -> None:
        self.buf = text
        self.cut = CUT if finish_reason == "length" else ""
        self.think: str | None = None
        self.answer: str | None = None  # None when the reply has an <execute> block
        self.notes: list[str] = []
        self.calls: list[RawCall] = []  # tool elements in block order, valid or not
        self.json_items: list[Any] | None = None  # the JSON form's array, once decoded
        self.json_at = 0  # where the JSON form's array starts
        self.block_end: int | None = None  # index just past the block's </execute>
        self.trailing = False  # non-blank text after </execute> (ignored)

    def fail(self, pos: int, detail: str, message: str) -> ProtocolError:
        return located_error(EXECUTE_INVALID, self.buf, pos, detail, message)

    def _unclosed(self, pos: int, detail: str, opener: str, fix: str) -> ProtocolError:
        """The reply ended inside ``opener``."""
        return self.fail(pos, detail, f"{opener} opened {{at}} is never closed: {fix}{self.cut}")

    def _markup(self, i: int, unnamed: str) -> str | None:
        """What the ``<!`` or ``<?`` at ``i`` opens, or None for anything else."""
        if not self.buf.startswith(("<!", "<?"), i):
            return None
        return next((what for k, what in MARKUP if self.buf.startswith(k, i)), unnamed)

    def read(self) -> None:
        """Outside the block: answer text, <think> blocks, the opening <execute>."""
        buf, pos = self.buf, 0
        answer: list[str] = []
        thinks: list[str] = []
        while (m := OUTSIDE_TAG_RE.search(buf, pos)) is not None:
            lt, end = m.start(), m.end()
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
            answer.append(buf[pos:lt])
            pos = end
            if name == "results":
                raise self.fail(
                    lt,
                    "RESULTS_NOT_ALLOWED",
                    "<results> {at} is written by the system, never by you: write your "
                    "<execute> block, stop after </execute>, and wait for the results.",
                )
            if name == "think":
                if slash:  # "</think>" alone: the chat template opened the block for the model
                    thinks.append("".join(answer))
                    answer = []
                    self.notes.append("</think> without <think>: the text before it is thinking")
                elif rest != "/":
                    close = buf.find("</think>", end)
                    if close < 0:
                        raise self._unclosed(
                            lt,
                            "UNCLOSED_THINK",
                            "<think>",
                            "end it with </think>, then write <execute> or your answer.",
                        )
                    thinks.append(buf[end:close])
                    pos = close + len("</think>")
                continue
            if slash:
                raise self.fail(
                    lt,
                    "NO_EXECUTE_BLOCK",
                    "</execute> {at} closes no block: open it with <execute>.",
                )
            if rest == "/":
                raise self.fail(lt, "EMPTY_EXECUTE", "<execute/> {at} " + EMPTY)
            if rest:
                raise self.fail(lt, "ATTRIBUTES_NOT_ALLOWED:execute", ATTRS_EXECUTE)
            if "".join(answer).strip(WS):
                self.notes.append("ignored the text before <execute>")
            self.block_end = self._block(lt, end)
            self.trailing = skip_blanks(buf, self.block_end) < len(buf)
            break
        self.think = "\n\n".join(t.strip(WS) for t in thinks) if thinks else None
        if self.block_end is not None:
            return
        self.answer = ("".join(answer) + buf[pos:]).strip(WS)
        if not self.answer:
            raise ProtocolError(
                EXECUTE_INVALID,
                "The reply has no <execute> block and no answer: call tools in <execute>, "
                "or write your final answer as text." + self.cut,
                details=["EMPTY_RESPONSE"],
            )
        if self.cut:
            self.notes.append("the answer was cut off at the token limit (finish_reason=length)")

    def _element_tag(self, i: int, detail: str, message: str) -> re.Match[str] | None:
        """The tag at ``i`` inside the block or a tool element, where text is an error;
        None if the reply ends there."""
        m = TAG_RE.match(self.buf, i)
        if m is not None or i == len(self.buf) or PARTIAL_TAG_RE.match(self.buf, i):
            return m
        what = self._markup(i, "a declaration <!")
        if what is not None:
            raise self.fail(i, "UNEXPECTED_MARKUP", f"Markup ({what}) {{at}} is not allowed here.")
        raise self.fail(i, detail, message)

    def _block(self, at: int, pos: int) -> int:
        """Inside <execute> (opened at ``at``): tool elements or one JSON array, up to
        </execute>; returns the index past it."""
        buf = self.buf
        while True:
            i = skip_blanks(buf, pos)
            if not self.calls and buf.startswith(("[", "{"), i):
                return self._json(at, i)
            m = self._element_tag(i, "TEXT_IN_EXECUTE", TEXT_IN_EXECUTE)
            if m is None:
                raise self._unclosed(at, "UNCLOSED_EXECUTE", "<execute>", CLOSE_EXECUTE)
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
            if slash:
                if name != "execute":
                    raise self.fail(
                        i,
                        f"UNEXPECTED_CLOSING_TAG:{name}",
                        f"Closing tag </{name}> {{at}} closes nothing that is open: remove it.",
                    )
                if rest:
                    raise self.fail(i, "ATTRIBUTES_NOT_ALLOWED:execute", ATTRS_EXECUTE)
                if not self.calls:
                    raise self.fail(at, "EMPTY_EXECUTE", "<execute> {at} " + EMPTY)
                return m.end()
            if name == "execute":
                raise self.fail(
                    i, "NESTED_EXECUTE", "<execute> {at} is inside <execute>: one block per reply."
                )
            call = RawCall(name, i, len(self.calls))
            if rest and rest != "/":
                raise self.fail(
                    i,
                    f"call[{call.index}]:ATTRIBUTES_NOT_ALLOWED:{name}",
                    ATTRS_CALL.format(tag=name),
                )
            pos = m.end() if rest == "/" else self._tool(call, m.end())  # <tool/>: no arguments
            self.calls.append(call)

    def _tool(self, call: RawCall, pos: int) -> int:
        """Inside a tool element: argument elements up to the tool's closing tag."""
        buf, p, tool = self.buf, f"call[{call.index}]:", call.name
        text_in_tool = (
            f"Text {{at}} is directly inside <{tool}>: put each value in its argument's "
            f"element, <{tool}><arg>value</arg></{tool}>."
        )

        while True:
            i = skip_blanks(buf, pos)
            m = self._element_tag(i, f"{p}TEXT_IN_TOOL:{tool}", text_in_tool)
            if m is None:
                fix = f"add </{tool}>."
                raise self._unclosed(call.pos, f"{p}UNCLOSED_TOOL:{tool}", f"<{tool}>", fix)
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
            if slash and name == tool and not rest:
                return m.end()
            if slash and name == "execute":
                raise self.fail(
                    call.pos,
                    f"{p}UNCLOSED_TOOL:{tool}",
                    f"<{tool}> opened {{at}} is never closed: add </{tool}> before </execute>.",
                )
            if slash and name != tool:
                raise self.fail(
                    i,
                    f"{p}MISMATCHED_CLOSING_TAG:expected_{tool}_got_{name}",
                    f"Closing tag </{name}> {{at}} does not match the open <{tool}>: close "
                    f"it with </{tool}>.",
                )
            if rest and rest != "/":
                raise self.fail(i, f"{p}ATTRIBUTES_NOT_ALLOWED:{name}", ATTRS_CALL.format(tag=name))
            if rest == "/":  # <arg/>: an empty value
                pos, value = m.end(), ""
            else:
                pos, value = self._value(p, name, i, m.end())
            call.args.append((name, i, value))

    def _value(self, p: str, arg: str, at: int, pos: int) -> tuple[int, str]:
        """An argument's value (opened at ``at``): text, entities, CDATA sections, up to its
        closing tag; returns the index past that tag and the value's text."""
        buf = self.buf
        pieces: list[tuple[bool, str]] = []
        # The text since the last CDATA section, buf[run:lt], is sliced once where it ends,
        # so entities and layout read the same wherever a "<" that opens no tag sits, and a
        # value full of "<" stays linear (a piece per "<" cost 13x the input in memory).
        run = pos
        while True:
            opener = OPENER_RE.search(buf, pos)
            lt = len(buf) if opener is None else opener.start()
            if buf.startswith(CDATA, lt):
                end = buf.find("]]>", lt + len(CDATA))
                if end < 0:
                    fix = "end it with ]]>."
                    raise self._unclosed(lt, f"{p}UNCLOSED_CDATA:{arg}", CDATA, fix)
                if lt > run:
                    pieces.append((False, buf[run:lt]))
                pieces.append((True, buf[lt + len(CDATA) : end]))
                run = pos = end + 3
                continue
            m = TAG_RE.match(buf, lt)
            if m is None:
                # The end of the reply, or a CDATA opener or a tag cut off by it (a whole
                # CDATA opener was read above, so a slice that starts CDATA is at the end).
                cut = CDATA.startswith(buf[lt : lt + len(CDATA)])
                if cut or PARTIAL_TAG_RE.match(buf, lt):
                    raise self._unclosed(at, f"{p}UNCLOSED_ARG:{arg}", f"<{arg}>", f"add </{arg}>.")
                what = self._markup(lt, "<!")
                if what is not None:
                    raise self._markup_in_value(lt, p, arg, what)
                pos = lt + 1  # "<3", "a <b": a "<" that opens no tag is text
                continue
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
            if slash and name == arg and not rest:
                if lt > run:
                    pieces.append((False, buf[run:lt]))
                return m.end(), _value_text(pieces)
            if slash:
                raise self.fail(
                    at,
                    f"{p}UNCLOSED_ARG:{arg}",
                    f"<{arg}> opened {{at}} is not closed before </{name}>: add </{arg}>." + SAFE,
                )
            raise self._markup_in_value(lt, p, arg, f"<{name}>")

    def _markup_in_value(self, lt: int, p: str, arg: str, what: str) -> ProtocolError:
        return self.fail(
            lt,
            f"{p}MARKUP_IN_VALUE:{arg}",
            f"The value of <{arg}> contains markup ({what}) {{at}}: wrap the value in "
            "<![CDATA[ ... ]]>, or escape < as &lt; and > as &gt;.",
        )

    def _json(self, at: int, start: int) -> int:
        """The JSON form, ``[{"name": ..., "args": {...}}]``: decoded whole up to the block's
        </execute>; returns the index past it."""
        buf = self.buf
        body = JSON_BODY_RE.match(buf, start)
        stop = body.end() if body is not None else start
        close = EXEC_CLOSE_RE.match(buf, stop)
        if close is None:  # the end of the reply, or a JSON string that runs to it
            hint = ' A JSON string in it is still open (a missing ").' if stop < len(buf) else ""
            raise self._unclosed(at, "UNCLOSED_EXECUTE", "<execute>", CLOSE_EXECUTE + hint)
        self.json_at = start
        try:
            value = json.loads(buf[start:stop], parse_constant=reject_constant)
        except json.JSONDecodeError as err:
            raise self.fail(
                start + err.pos,
                "INVALID_JSON",
                f"The JSON in <execute> is invalid {{at}}: {err.msg}. " + JSON_SHAPE,
            ) from None
        except (ValueError, RecursionError) as err:
            raise self.fail(
                start,
                "INVALID_JSON",
                f"The JSON in <execute> {{at}} is invalid ({err}). " + JSON_SHAPE,
            ) from None
        if lone_surrogate(value, buf, start, stop):
            raise self.fail(
                start,
                "INVALID_JSON",
                "The JSON in <execute> {at} escapes a lone surrogate (\\ud800).",
            )
        if not isinstance(value, list):
            raise self.fail(start, "JSON_NOT_ARRAY", "The JSON {at} is not an array. " + JSON_SHAPE)
        if not value:
            raise self.fail(at, "EMPTY_EXECUTE", "<execute> {at} " + EMPTY)
        self.json_items = value
        return close.end()
