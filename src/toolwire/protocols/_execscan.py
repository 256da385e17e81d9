"""The wire side of seed 000's ``execute`` transport: a resumable one-pass scanner.

``Scanner`` reads a reply in chunks of any size and finds its structure:
``<think>`` blocks (skipped), answer text, the ``<execute>`` block with its tool
elements and their raw argument values (text, entities, CDATA), or its JSON
array. Each call goes to a ``CallSink`` (``execute.py``) as soon as it closes;
the sink owns tool names and schemas. A structural problem raises
``ProtocolError(EXECUTE_INVALID)`` at its first occurrence, with line and
column. Each step consumes only what it can decide and waits otherwise, so the
outcome does not depend on where the chunks were cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.domain import ToolCall
from toolwire.errors import ProtocolError
from toolwire.protocols._tagscan import MAX_INPUT_BYTES, line_column, unescape_text

__all__ = [
    "EXECUTE_INVALID",
    "CallSink",
    "RawCall",
    "ScanEnd",
    "Scanner",
    "lone_surrogate",
    "value_text",
]

EXECUTE_INVALID = "EXECUTE_INVALID"  # errors.py holds no constant for seed 000 yet

_WS = " \t\r\n"
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*+"
# A tag is at most 256 characters past its name; longer is text. The bound keeps a
# stream that waits for the ">" of a would-be tag from rescanning without end.
_TAG_RE = re.compile(rf"<(/?)({_NAME})([^<>]{{0,256}})>")
_PARTIAL_TAG_RE = re.compile(rf"</?(?:{_NAME}[^<>]{{0,256}})?\Z")  # may still become a tag
_NAME_RE = re.compile(_NAME)
_SPACE_RE = re.compile(r"[ \t\r\n]*+")
_CDATA = "<![CDATA["
_EXEC_CLOSE_RE = re.compile(r"</execute[ \t\r\n]*+>")
_EXEC_CLOSE_WAIT_RE = re.compile(r"</execute[ \t\r\n]*+\Z")
_JSON_PLAIN_RE = re.compile(r'[^"\[\]{}<]*+')
_JSON_STRING_RE = re.compile(r'(?:[^"\\]++|\\.)*+', re.S)
_LAYOUT_HEAD_RE = re.compile(r"\r?\n")
_LAYOUT_TAIL_RE = re.compile(r"\r?\n[ \t]*+\Z")
_OUTSIDE = ("think", "execute", "results")  # the only tags read outside the block

_OUT, _THINK, _BLOCK, _TOOL, _ARG, _JSON, _DONE = range(7)

_EMPTY = "calls no tool: put at least one call in it, or leave it out and write your answer."
_ATTRS = "Tag <{tag} ...> {{at}} has attributes; this protocol uses none: remove them."
_ATTRS_CALL = (
    "Tag <{tag} ...> {{at}} has attributes; this protocol uses none: write each argument as "
    "an element, <tool><arg>value</arg></tool>."
)
_MARKUP = (
    ("<!--", "a comment <!--"),
    ("<![CDATA[", "a CDATA section outside an argument"),
    ("<?", "a processing instruction <?"),
)
_TEXT_IN_EXECUTE = (
    "Text {at} is inside <execute> but outside any call: put only tool elements, or one JSON "
    "array, in the block."
)
_SAFE = (
    " A value holding markup (HTML, XML, </execute>) goes inside <![CDATA[ ... ]]>, or escape"
    " < as &lt; and > as &gt;."
)
_JSON_SHAPE = 'Write [{"name": "tool", "args": {"argument": value}}, ...].'

Pieces = list[tuple[bool, str]]  # (is CDATA, text) runs of one argument value


@dataclass(slots=True)
class RawCall:
    """A tool element as written: its name, position, index in the block, raw arguments."""

    name: str
    pos: int
    index: int
    args: list[tuple[str, int, Pieces]] = field(default_factory=list)  # (name, pos, pieces)


@dataclass(frozen=True, slots=True)
class ScanEnd:
    """What the scanner makes of a whole reply besides its calls."""

    think: str | None
    answer: str | None  # None when the reply has an <execute> block
    trailing: bool  # non-blank text after </execute> (ignored)
    notes: tuple[str, ...]
    end: int | None  # index just past the block's </execute>


class CallSink(Protocol):
    """Turns raw calls into checked ``ToolCall``s; returns None for a call with problems."""

    def element(self, call: RawCall) -> ToolCall | None: ...
    def json_item(self, item: Any, index: int, at: int, record: bool) -> ToolCall | None: ...


def value_text(pieces: Pieces) -> str:
    """An argument's text: entities decoded outside CDATA, CDATA taken literally.

    A value that is one CDATA section (with only whitespace around it) is that
    section's text exactly. Otherwise one newline after the opening tag and one
    newline plus the closing tag's indentation are layout, not value.
    """
    cdata = [text for is_cdata, text in pieces if is_cdata]
    if len(cdata) == 1 and all(is_cdata or not text.strip(_WS) for is_cdata, text in pieces):
        return cdata[0]
    parts = [text for _, text in pieces]
    if parts and not pieces[0][0]:
        head = _LAYOUT_HEAD_RE.match(parts[0])
        if head is not None:
            parts[0] = parts[0][head.end() :]
    if parts and not pieces[-1][0]:
        parts[-1] = _LAYOUT_TAIL_RE.sub("", parts[-1], count=1)
    return "".join(
        text if is_cdata or "&" not in text else unescape_text(text)
        for (is_cdata, _), text in zip(pieces, parts, strict=True)
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def lone_surrogate(value: Any, raw: str, lo: int = 0, hi: int | None = None) -> bool:
    """Does decoded JSON hold a lone surrogate (from an escape such as \\ud800)?

    Such a string cannot be encoded as UTF-8: a tool, the store or the next prompt
    would fail on it later, so the parser refuses it now.
    """
    hi = len(raw) if hi is None else hi
    if raw.find("\\", lo, hi) < 0 and (raw.isascii() or raw[lo:hi].isascii()):
        # No escape and no non-ASCII character: nothing could make one. (A str the
        # caller decoded from UTF-8 never holds one, but a provider's JSON decoder
        # turns "\ud800" into a raw lone surrogate before the text reaches us.)
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class Scanner:
    """The state machine. Positions index ``buf``, the text up to the block's end."""

    def __init__(self, sink: CallSink, *, stream: bool) -> None:
        self.sink = sink
        self.stream = stream  # preview JSON-form items as they close
        self.buf = ""
        self.pos = 0
        self.seek = 0  # inside a value: no "<" (or "]]>") before this position
        self.state = _OUT
        self.final = False
        self.chars, self.nbytes = 0, -1
        self.answer: list[str] = []
        self.think: list[str] = []
        self.mark = 0  # where the open <think> or argument starts
        self.content = 0  # where the open <think>'s text starts
        self.exec_pos = 0
        self.block_end = 0  # index just past </execute>, once read
        self.cdata, self.cdata_pos = -1, 0  # an open CDATA section: its text start, its "<"
        self.count = 0  # tool calls seen, valid or not: the next call's index
        self.call: RawCall | None = None
        self.arg = ""
        self.pieces: Pieces = []
        self.run: list[str] = []  # the text run being read, joined when it ends
        self.notes: list[str] = []
        self.trailing = False
        self.json_at = self.jpos = self.depth = 0
        self.in_string = False
        self.item = -1  # start of the JSON array item being read
        self.previewed = 0
        self.error: ProtocolError | None = None

    @property
    def closed(self) -> bool:
        return self.state == _DONE

    def feed(self, chunk: str) -> list[ToolCall]:
        if self.error is not None:
            raise self.error
        if self.state == _DONE:  # reading stopped at </execute>: only note that more came
            self.trailing = self.trailing or bool(chunk.strip(_WS))
            return []
        self._grow(chunk)
        return self._run()

    def finish(self, finish_reason: str) -> ScanEnd:
        """Decide what is still pending; raise if the reply ends inside a structure."""
        if self.error is not None:
            raise self.error
        self.final = True
        self._run()
        try:
            return self._end(finish_reason)
        except ProtocolError as err:
            self.error = err
            raise

    def fail(self, pos: int, detail: str, message: str) -> ProtocolError:
        """An error located at ``pos``; ``{at}`` in the message becomes "at line L, column C"."""
        line, col = line_column(self.buf, pos)
        text = message.replace("{at}", f"at line {line}, column {col}")
        return ProtocolError(EXECUTE_INVALID, text, line, col, [detail])

    def _grow(self, chunk: str) -> None:
        self.chars += len(chunk)
        if self.chars * 4 > MAX_INPUT_BYTES:  # encode only when characters alone don't decide
            if self.nbytes < 0:
                self.nbytes = len(self.buf.encode("utf-8", "surrogatepass"))
            self.nbytes += len(chunk.encode("utf-8", "surrogatepass"))
            if self.nbytes > MAX_INPUT_BYTES:
                self.error = ProtocolError(
                    EXECUTE_INVALID,
                    f"The reply is over {MAX_INPUT_BYTES} bytes: write a shorter reply.",
                    details=["RESPONSE_TOO_LARGE"],
                )
                raise self.error
        buf, self.buf = self.buf, ""
        buf += chunk  # the only reference: CPython extends the string in place
        self.buf = buf

    def _run(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        try:
            while _STEPS[self.state](self, out):
                pass
        except ProtocolError as err:
            self.error = err
            raise
        return out

    def _skip_space(self) -> int:
        m = _SPACE_RE.match(self.buf, self.pos)
        self.pos = m.end() if m is not None else self.pos
        return self.pos

    def _markup_pending(self, i: int) -> bool:
        """Is the text from ``i`` the start of ``<!--``, ``<![CDATA[`` or ``<?``, cut short?"""
        if self.final or len(self.buf) - i >= len(_CDATA):  # the longest marker
            return False
        rest = self.buf[i:]
        return any(len(rest) < len(k) and k.startswith(rest) for k, _ in _MARKUP)

    def _not_a_tag(self, i: int, detail: str, message: str) -> ProtocolError:
        buf = self.buf
        if buf.startswith(("<!", "<?"), i):
            what = next((w for k, w in _MARKUP if buf.startswith(k, i)), "a declaration <!")
            return self.fail(i, "UNEXPECTED_MARKUP", f"Markup ({what}) {{at}} is not allowed here.")
        return self.fail(i, detail, message)

    # --------------------------------------------------------------- steps

    def _out(self, out: list[ToolCall]) -> bool:
        """Before any block: answer text, <think> blocks, the opening <execute>."""
        buf, pos = self.buf, self.pos
        lt = buf.find("<", pos)
        if lt < 0:
            self.answer.append(buf[pos:])
            self.pos = len(buf)
            return False
        if lt > pos:
            self.answer.append(buf[pos:lt])
        self.pos = lt
        m = _TAG_RE.match(buf, lt)
        if m is None or m.group(2) not in _OUTSIDE:
            if not self.final and self._maybe_keyword(lt):
                return False
            self.answer.append("<")
            self.pos = lt + 1
            return True
        slash, name, rest, end = m.group(1), m.group(2), m.group(3).strip(_WS), m.end()
        if name == "results":
            raise self.fail(
                lt,
                "RESULTS_NOT_ALLOWED",
                "<results> {at} is written by the system, never by you: write your <execute> "
                "block, stop after </execute>, and wait for the results.",
            )
        if name == "think":
            if slash:  # "</think>" alone: the chat template opened the block for the model
                self.think.append("".join(self.answer))
                self.answer = []
                self.notes.append("</think> without <think>: the text before it is thinking")
            elif rest != "/":
                self.state, self.mark, self.content = _THINK, lt, end
            self.pos = end
            return True
        if slash:
            raise self.fail(
                lt, "NO_EXECUTE_BLOCK", "</execute> {at} closes no block: open it with <execute>."
            )
        if rest == "/":
            raise self.fail(lt, "EMPTY_EXECUTE", "<execute/> {at} " + _EMPTY)
        if rest:
            raise self.fail(lt, "ATTRIBUTES_NOT_ALLOWED:execute", _ATTRS.format(tag="execute"))
        if "".join(self.answer).strip(_WS):
            self.notes.append("ignored the text before <execute>")
        self.answer = []
        self.state, self.exec_pos, self.pos = _BLOCK, lt, end
        return True

    def _maybe_keyword(self, lt: int) -> bool:
        """Could the text from ``lt`` to the end still become <think>, <execute> or <results>?"""
        buf = self.buf
        if _PARTIAL_TAG_RE.match(buf, lt) is None:
            return False
        m = _NAME_RE.match(buf, lt + 2 if buf.startswith("</", lt) else lt + 1)
        if m is None:
            return True
        if m.end() < len(buf):  # the name is complete
            return m.group() in _OUTSIDE
        return any(k.startswith(m.group()) for k in _OUTSIDE)

    def _think(self, out: list[ToolCall]) -> bool:
        end = self.buf.find("</think>", self.pos)
        if end < 0:
            self.pos = max(self.pos, len(self.buf) - 7)  # "</think>" may be split at the end
            return False
        self.think.append(self.buf[self.content : end])
        self.pos, self.state = end + 8, _OUT
        return True

    def _block(self, out: list[ToolCall]) -> bool:
        """Inside <execute>, between calls: a tool element, </execute>, or a JSON array."""
        buf = self.buf
        i = self._skip_space()
        if i == len(buf):
            return False
        if buf[i] != "<":
            if self.count == 0 and buf[i] in "[{":
                self.state, self.json_at, self.jpos = _JSON, i, i
                return True
            raise self.fail(i, "TEXT_IN_EXECUTE", _TEXT_IN_EXECUTE)
        m = _TAG_RE.match(buf, i)
        if m is None:
            if _PARTIAL_TAG_RE.match(buf, i) or self._markup_pending(i):
                return False
            raise self._not_a_tag(i, "TEXT_IN_EXECUTE", _TEXT_IN_EXECUTE)
        slash, name, rest = m.group(1), m.group(2), m.group(3).strip(_WS)
        if slash:
            if name != "execute":
                raise self.fail(
                    i,
                    f"UNEXPECTED_CLOSING_TAG:{name}",
                    f"Closing tag </{name}> {{at}} closes nothing that is open: remove it.",
                )
            if rest:
                raise self.fail(i, "ATTRIBUTES_NOT_ALLOWED:execute", _ATTRS.format(tag="execute"))
            if self.count == 0:
                raise self.fail(self.exec_pos, "EMPTY_EXECUTE", "<execute> {at} " + _EMPTY)
            self.pos = self.block_end = m.end()
            self.state = _DONE
            return True
        if name == "execute":
            raise self.fail(
                i, "NESTED_EXECUTE", "<execute> {at} is inside <execute>: one block per reply."
            )
        if rest and rest != "/":
            raise self.fail(
                i, f"call[{self.count}]:ATTRIBUTES_NOT_ALLOWED:{name}", _ATTRS_CALL.format(tag=name)
            )
        self.call = RawCall(name, i, self.count)
        self.pos = m.end()
        if rest == "/":  # <tool/>: a call without arguments
            self._end_call(out)
        else:
            self.state = _TOOL
        return True

    def _tool(self, out: list[ToolCall]) -> bool:
        """Inside a tool element: argument elements, then the tool's closing tag."""
        buf, call, p = self.buf, self.call, f"call[{self.count}]:"
        assert call is not None
        i = self._skip_space()
        if i == len(buf):
            return False
        text_in_tool = (
            f"Text {{at}} is directly inside <{call.name}>: put each value in its argument's "
            f"element, <{call.name}><arg>value</arg></{call.name}>."
        )
        if buf[i] != "<":
            raise self.fail(i, f"{p}TEXT_IN_TOOL:{call.name}", text_in_tool)
        m = _TAG_RE.match(buf, i)
        if m is None:
            if _PARTIAL_TAG_RE.match(buf, i) or self._markup_pending(i):
                return False
            raise self._not_a_tag(i, f"{p}TEXT_IN_TOOL:{call.name}", text_in_tool)
        slash, name, rest = m.group(1), m.group(2), m.group(3).strip(_WS)
        if slash and name == call.name and not rest:
            self.pos, self.state = m.end(), _BLOCK
            self._end_call(out)
            return True
        if slash and name == "execute":
            raise self.fail(
                call.pos,
                f"{p}UNCLOSED_TOOL:{call.name}",
                f"<{call.name}> opened {{at}} is never closed: add </{call.name}> before "
                "</execute>.",
            )
        if slash and name != call.name:
            raise self.fail(
                i,
                f"{p}MISMATCHED_CLOSING_TAG:expected_{call.name}_got_{name}",
                f"Closing tag </{name}> {{at}} does not match the open <{call.name}>: close "
                f"it with </{call.name}>.",
            )
        if rest and rest != "/":
            raise self.fail(i, f"{p}ATTRIBUTES_NOT_ALLOWED:{name}", _ATTRS_CALL.format(tag=name))
        self.pos = m.end()
        if rest == "/":  # <arg/>: an empty value
            call.args.append((name, i, []))
        else:
            self.state, self.arg, self.mark, self.seek = _ARG, name, i, 0
            self.pieces, self.run = [], []
        return True

    def _end_call(self, out: list[ToolCall]) -> None:
        call, self.call = self.call, None
        assert call is not None
        self.count += 1
        checked = self.sink.element(call)
        if checked is not None:
            out.append(checked)

    def _end_run(self) -> None:
        # Adjacent text is one piece, so entities and layout read the same however
        # the stream was cut; joined once, so a value of many "<" stays linear.
        if self.run:
            self.pieces.append((False, "".join(self.run)))
            self.run = []

    def _arg(self, out: list[ToolCall]) -> bool:
        """An argument's value: text, entities, CDATA sections, up to its closing tag."""
        buf, n, p = self.buf, len(self.buf), f"call[{self.count}]:"
        while True:
            if self.cdata >= 0:
                end = buf.find("]]>", max(self.cdata, self.seek))
                if end < 0:
                    self.seek = max(self.cdata, n - 2)
                    return False
                self._end_run()
                self.pieces.append((True, buf[self.cdata : end]))
                self.pos, self.cdata, self.seek = end + 3, -1, 0
            pos = self.pos
            lt = buf.find("<", max(pos, self.seek))
            if lt < 0:
                self.seek = n  # keep the text unconsumed: it joins what comes next
                return False
            if lt > pos:
                self.run.append(buf[pos:lt])
                self.pos = lt
            if buf.startswith(_CDATA, lt):
                self.cdata_pos, self.cdata = lt, lt + len(_CDATA)
                self.pos = self.cdata
                continue
            m = _TAG_RE.match(buf, lt)
            if m is None:
                if (n - lt < len(_CDATA) and _CDATA.startswith(buf[lt:])) or (
                    _PARTIAL_TAG_RE.match(buf, lt)
                ):
                    return False
                if self._markup_pending(lt):
                    return False
                if buf.startswith(("<!", "<?"), lt):
                    what = next((w for k, w in _MARKUP if buf.startswith(k, lt)), "<!")
                    raise self._markup_in_value(lt, p, what)
                self.run.append("<")  # "a < b", "<3": a "<" that opens no tag is text
                self.pos = lt + 1
                continue
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(_WS)
            if slash and name == self.arg and not rest:
                assert self.call is not None
                self._end_run()
                self.call.args.append((self.arg, self.mark, self.pieces))
                self.pos, self.state = m.end(), _TOOL
                return True
            if slash:
                raise self.fail(
                    self.mark,
                    f"{p}UNCLOSED_ARG:{self.arg}",
                    f"<{self.arg}> opened {{at}} is not closed before </{name}>: add "
                    f"</{self.arg}>." + _SAFE,
                )
            raise self._markup_in_value(lt, p, f"<{name}>")

    def _markup_in_value(self, lt: int, p: str, what: str) -> ProtocolError:
        return self.fail(
            lt,
            f"{p}MARKUP_IN_VALUE:{self.arg}",
            f"The value of <{self.arg}> contains markup ({what}) {{at}}: wrap the value in "
            "<![CDATA[ ... ]]>, or escape < as &lt; and > as &gt;.",
        )

    def _json(self, out: list[ToolCall]) -> bool:
        """The JSON form: follow strings and depth to find the block's end (and, when
        streaming, each array item as it closes); decode the whole array at the end."""
        buf, n, jp = self.buf, len(self.buf), self.jpos
        while True:
            if self.in_string:
                m = _JSON_STRING_RE.match(buf, jp)
                jp = m.end() if m is not None else jp
                if jp >= n or buf[jp] != '"':  # the string (or an escape) goes on
                    self.jpos = jp
                    return False
                self.in_string = False
                jp += 1
                continue
            m = _JSON_PLAIN_RE.match(buf, jp)
            jp = m.end() if m is not None else jp
            if jp >= n:
                self.jpos = jp
                return False
            c = buf[jp]
            if c == '"':
                self.in_string = True
            elif c in "[{":
                self.depth += 1
                if self.depth == 2 and buf[self.json_at] == "[":
                    self.item = jp
            elif c in "]}":
                self.depth -= 1
                if self.depth == 1 and self.item >= 0:
                    if self.stream:
                        self._preview(buf[self.item : jp + 1], out)
                    self.item = -1
            else:  # "<": the block ends at the first </execute> outside a JSON string
                close = _EXEC_CLOSE_RE.match(buf, jp)
                if close is not None:
                    self._end_json(jp)
                    self.pos = self.block_end = close.end()
                    self.state = _DONE
                    return True
                wait = n - jp < 9 and "</execute".startswith(buf[jp:])
                if wait or _EXEC_CLOSE_WAIT_RE.match(buf, jp):
                    self.jpos = jp
                    return False
            jp += 1

    def _preview(self, text: str, out: list[ToolCall]) -> None:
        index, self.previewed = self.previewed, self.previewed + 1
        try:
            item = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return  # the whole array is decoded (and its error reported) at </execute>
        call = self.sink.json_item(item, index, self.json_at, False)
        if call is not None:
            out.append(call)

    def _end_json(self, end: int) -> None:
        at = self.json_at
        try:
            value = json.loads(self.buf[at:end], parse_constant=_reject_constant)
        except json.JSONDecodeError as err:
            raise self.fail(
                at + err.pos,
                "INVALID_JSON",
                f"The JSON in <execute> is invalid {{at}}: {err.msg}. " + _JSON_SHAPE,
            ) from None
        except (ValueError, RecursionError) as err:
            raise self.fail(
                at,
                "INVALID_JSON",
                f"The JSON in <execute> {{at}} is invalid ({err}). " + _JSON_SHAPE,
            ) from None
        if lone_surrogate(value, self.buf, at, end):
            raise self.fail(
                at, "INVALID_JSON", "The JSON in <execute> {at} escapes a lone surrogate (\\ud800)."
            )
        if not isinstance(value, list):
            raise self.fail(at, "JSON_NOT_ARRAY", "The JSON {at} is not an array. " + _JSON_SHAPE)
        if not value:
            raise self.fail(self.exec_pos, "EMPTY_EXECUTE", "<execute> {at} " + _EMPTY)
        for index, item in enumerate(value):
            self.sink.json_item(item, index, at, True)
        self.count = len(value)

    def _done(self, out: list[ToolCall]) -> bool:
        if self._skip_space() < len(self.buf):
            self.trailing = True
        self.pos = len(self.buf)
        return False

    # ----------------------------------------------------------------- end

    def _end(self, finish_reason: str) -> ScanEnd:
        cut = (
            " The reply was cut off at the token limit: write less (fewer calls, shorter values)."
            if finish_reason == "length"
            else ""
        )
        state, p = self.state, f"call[{self.count}]:"
        if state == _THINK:
            raise self.fail(
                self.mark,
                "UNCLOSED_THINK",
                "<think> opened {at} is never closed: end it with </think>, then write "
                "<execute> or your answer." + cut,
            )
        if state in (_BLOCK, _JSON):
            hint = ' A JSON string in it is still open (a missing ").' if self.in_string else ""
            raise self.fail(
                self.exec_pos,
                "UNCLOSED_EXECUTE",
                "<execute> opened {at} is never closed: end the block with </execute>."
                + hint
                + cut,
            )
        if state == _TOOL:
            assert self.call is not None
            name = self.call.name
            raise self.fail(
                self.call.pos,
                f"{p}UNCLOSED_TOOL:{name}",
                f"<{name}> opened {{at}} is never closed: add </{name}>." + cut,
            )
        if state == _ARG and self.cdata >= 0:
            raise self.fail(
                self.cdata_pos,
                f"{p}UNCLOSED_CDATA:{self.arg}",
                "<![CDATA[ opened {at} is never closed: end it with ]]>." + cut,
            )
        if state == _ARG:
            raise self.fail(
                self.mark,
                f"{p}UNCLOSED_ARG:{self.arg}",
                f"<{self.arg}> opened {{at}} is never closed: add </{self.arg}>." + cut,
            )
        think = "\n\n".join(t.strip(_WS) for t in self.think) if self.think else None
        if state == _DONE:
            return ScanEnd(think, None, self.trailing, tuple(self.notes), self.block_end)
        answer = "".join(self.answer).strip(_WS)
        if not answer:
            raise ProtocolError(
                EXECUTE_INVALID,
                "The reply has no <execute> block and no answer: call tools in <execute>, "
                "or write your final answer as text." + cut,
                details=["EMPTY_RESPONSE"],
            )
        notes = list(self.notes)
        if finish_reason == "length":
            notes.append("the answer was cut off at the token limit (finish_reason=length)")
        return ScanEnd(think, answer, False, tuple(notes), None)


_STEPS = (
    Scanner._out,
    Scanner._think,
    Scanner._block,
    Scanner._tool,
    Scanner._arg,
    Scanner._json,
    Scanner._done,
)
