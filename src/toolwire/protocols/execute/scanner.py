"""The wire side of seed 000's ``execute`` transport: a one-pass scanner over a whole reply.

``Scanner`` finds a reply's structure: ``<think>`` blocks (skipped), answer text,
the ``<execute>`` block with its tool elements and their raw argument values
(text, entities, CDATA), or its JSON array (decoded whole). A structural problem raises
``ProtocolError(EXECUTE_INVALID)`` at its first occurrence, with line and
column. It never looks back, so a reply costs one pass; ``parse.py`` gives the
calls their meaning (tools, schemas, typed values).
"""

from __future__ import annotations

import json
from typing import Any

from toolwire.errors import ProtocolError
from toolwire.protocols.execute.wire import (
    ARG,
    ATTRS,
    ATTRS_CALL,
    BLOCK,
    CDATA,
    DONE,
    EMPTY,
    EXEC_CLOSE_RE,
    EXECUTE_INVALID,
    JSON_FORM,
    JSON_PLAIN_RE,
    JSON_SHAPE,
    JSON_STRING_RE,
    MARKUP,
    OUT,
    OUTSIDE,
    PARTIAL_TAG_RE,
    SAFE,
    SPACE_RE,
    TAG_RE,
    TEXT_IN_EXECUTE,
    THINK,
    TOOL,
    WS,
    Pieces,
    RawCall,
    ScanEnd,
)
from toolwire.protocols.text import located_error, lone_surrogate, reject_constant

__all__ = ["Scanner"]


class Scanner:
    """The state machine over ``buf``; each step returns False at the end of the text."""

    def __init__(self, text: str) -> None:
        self.buf = text
        self.pos = 0
        self.state = OUT
        self.answer: list[str] = []
        self.think: list[str] = []
        self.mark = 0  # where the open <think> or argument starts
        self.content = 0  # where the open <think>'s text starts
        self.exec_pos = 0
        self.block_end = 0  # index just past </execute>, once read
        self.cdata, self.cdata_pos = -1, 0  # an open CDATA section: its text start, its "<"
        self.calls: list[RawCall] = []  # tool elements in block order, valid or not
        self.call: RawCall | None = None
        self.arg = ""
        self.pieces: Pieces = []
        # The text run being read, buf[run_from:run_to] (-1: none): contiguous until a
        # CDATA section, so sliced once when it ends (a list of pieces per "<" cost 13x
        # the input in memory on a value full of "<").
        self.run_from = self.run_to = -1
        self.notes: list[str] = []
        self.trailing = False
        self.json_at = 0  # where the JSON form's array starts
        self.json_items: list[Any] | None = None  # the JSON form's array, once decoded
        self.in_string = False

    def run(self, finish_reason: str) -> ScanEnd:
        """Read the whole reply; raise if it ends inside a structure."""
        while _STEPS[self.state](self):
            pass
        return self._end(finish_reason)

    def fail(self, pos: int, detail: str, message: str) -> ProtocolError:
        """An error located at ``pos``; ``{at}`` in the message becomes "at line L, column C"."""
        return located_error(EXECUTE_INVALID, self.buf, pos, detail, message)

    def _skip_space(self) -> int:
        m = SPACE_RE.match(self.buf, self.pos)
        self.pos = m.end() if m is not None else self.pos
        return self.pos

    def _not_a_tag(self, i: int, detail: str, message: str) -> ProtocolError:
        buf = self.buf
        if buf.startswith(("<!", "<?"), i):
            what = next((w for k, w in MARKUP if buf.startswith(k, i)), "a declaration <!")
            return self.fail(i, "UNEXPECTED_MARKUP", f"Markup ({what}) {{at}} is not allowed here.")
        return self.fail(i, detail, message)

    # --------------------------------------------------------------- steps

    def _out(self) -> bool:
        """Before any block: answer text, <think> blocks, the opening <execute>."""
        buf, pos = self.buf, self.pos
        lt = buf.find("<", pos)
        if lt < 0:
            self.answer.append(buf[pos:])
            self.pos = len(buf)
            return False
        if lt > pos:
            self.answer.append(buf[pos:lt])
        m = TAG_RE.match(buf, lt)
        if m is None or m.group(2) not in OUTSIDE:
            self.answer.append("<")
            self.pos = lt + 1
            return True
        slash, name, rest, end = m.group(1), m.group(2), m.group(3).strip(WS), m.end()
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
                self.state, self.mark, self.content = THINK, lt, end
            self.pos = end
            return True
        if slash:
            raise self.fail(
                lt, "NO_EXECUTE_BLOCK", "</execute> {at} closes no block: open it with <execute>."
            )
        if rest == "/":
            raise self.fail(lt, "EMPTY_EXECUTE", "<execute/> {at} " + EMPTY)
        if rest:
            raise self.fail(lt, "ATTRIBUTES_NOT_ALLOWED:execute", ATTRS.format(tag="execute"))
        if "".join(self.answer).strip(WS):
            self.notes.append("ignored the text before <execute>")
        self.answer = []
        self.state, self.exec_pos, self.pos = BLOCK, lt, end
        return True

    def _think(self) -> bool:
        end = self.buf.find("</think>", self.pos)
        if end < 0:
            return False
        self.think.append(self.buf[self.content : end])
        self.pos, self.state = end + 8, OUT
        return True

    def _block(self) -> bool:
        """Inside <execute>, between calls: a tool element, </execute>, or a JSON array."""
        buf = self.buf
        i = self._skip_space()
        if i == len(buf):
            return False
        if buf[i] != "<":
            if not self.calls and buf[i] in "[{":
                self.state, self.json_at = JSON_FORM, i
                return True
            raise self.fail(i, "TEXT_IN_EXECUTE", TEXT_IN_EXECUTE)
        m = TAG_RE.match(buf, i)
        if m is None:
            if PARTIAL_TAG_RE.match(buf, i):  # a tag cut off by the end of the reply
                return False
            raise self._not_a_tag(i, "TEXT_IN_EXECUTE", TEXT_IN_EXECUTE)
        slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
        if slash:
            if name != "execute":
                raise self.fail(
                    i,
                    f"UNEXPECTED_CLOSING_TAG:{name}",
                    f"Closing tag </{name}> {{at}} closes nothing that is open: remove it.",
                )
            if rest:
                raise self.fail(i, "ATTRIBUTES_NOT_ALLOWED:execute", ATTRS.format(tag="execute"))
            if not self.calls:
                raise self.fail(self.exec_pos, "EMPTY_EXECUTE", "<execute> {at} " + EMPTY)
            self.pos = self.block_end = m.end()
            self.state = DONE
            return True
        if name == "execute":
            raise self.fail(
                i, "NESTED_EXECUTE", "<execute> {at} is inside <execute>: one block per reply."
            )
        index = len(self.calls)
        if rest and rest != "/":
            raise self.fail(
                i, f"call[{index}]:ATTRIBUTES_NOT_ALLOWED:{name}", ATTRS_CALL.format(tag=name)
            )
        self.call = RawCall(name, i, index)
        self.pos = m.end()
        if rest == "/":  # <tool/>: a call without arguments
            self._end_call()
        else:
            self.state = TOOL
        return True

    def _tool(self) -> bool:
        """Inside a tool element: argument elements, then the tool's closing tag."""
        buf, call, p = self.buf, self.call, f"call[{len(self.calls)}]:"
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
        m = TAG_RE.match(buf, i)
        if m is None:
            if PARTIAL_TAG_RE.match(buf, i):  # a tag cut off by the end of the reply
                return False
            raise self._not_a_tag(i, f"{p}TEXT_IN_TOOL:{call.name}", text_in_tool)
        slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
        if slash and name == call.name and not rest:
            self.pos, self.state = m.end(), BLOCK
            self._end_call()
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
            raise self.fail(i, f"{p}ATTRIBUTES_NOT_ALLOWED:{name}", ATTRS_CALL.format(tag=name))
        self.pos = m.end()
        if rest == "/":  # <arg/>: an empty value
            call.args.append((name, i, []))
        else:
            self.state, self.arg, self.mark = ARG, name, i
            self.pieces, self.run_from = [], -1
        return True

    def _end_call(self) -> None:
        assert self.call is not None
        self.calls.append(self.call)
        self.call = None

    def _extend_run(self, start: int, stop: int) -> None:
        if self.run_from < 0:
            self.run_from = start
        self.run_to = stop

    def _end_run(self) -> None:
        # Adjacent text is one piece, so entities and layout read the same wherever a
        # "<" that opens no tag sits; sliced once, so a value of many "<" stays linear.
        if self.run_from >= 0:
            self.pieces.append((False, self.buf[self.run_from : self.run_to]))
            self.run_from = -1

    def _arg(self) -> bool:
        """An argument's value: text, entities, CDATA sections, up to its closing tag."""
        buf, n, p = self.buf, len(self.buf), f"call[{len(self.calls)}]:"
        while True:
            if self.cdata >= 0:
                end = buf.find("]]>", self.cdata)
                if end < 0:
                    return False
                self._end_run()
                self.pieces.append((True, buf[self.cdata : end]))
                self.pos, self.cdata = end + 3, -1
            pos = self.pos
            lt = buf.find("<", pos)
            if lt < 0:
                return False
            if lt > pos:
                self._extend_run(pos, lt)
                self.pos = lt
            if buf.startswith(CDATA, lt):
                self.cdata_pos, self.cdata = lt, lt + len(CDATA)
                self.pos = self.cdata
                continue
            m = TAG_RE.match(buf, lt)
            if m is None:
                # A CDATA opener or a tag cut off by the end of the reply.
                if (n - lt < len(CDATA) and CDATA.startswith(buf[lt:])) or (
                    PARTIAL_TAG_RE.match(buf, lt)
                ):
                    return False
                if buf.startswith(("<!", "<?"), lt):
                    what = next((w for k, w in MARKUP if buf.startswith(k, lt)), "<!")
                    raise self._markup_in_value(lt, p, what)
                self._extend_run(lt, lt + 1)  # "a < b", "<3": a "<" that opens no tag is text
                self.pos = lt + 1
                continue
            slash, name, rest = m.group(1), m.group(2), m.group(3).strip(WS)
            if slash and name == self.arg and not rest:
                assert self.call is not None
                self._end_run()
                self.call.args.append((self.arg, self.mark, self.pieces))
                self.pos, self.state = m.end(), TOOL
                return True
            if slash:
                raise self.fail(
                    self.mark,
                    f"{p}UNCLOSED_ARG:{self.arg}",
                    f"<{self.arg}> opened {{at}} is not closed before </{name}>: add "
                    f"</{self.arg}>." + SAFE,
                )
            raise self._markup_in_value(lt, p, f"<{name}>")

    def _markup_in_value(self, lt: int, p: str, what: str) -> ProtocolError:
        return self.fail(
            lt,
            f"{p}MARKUP_IN_VALUE:{self.arg}",
            f"The value of <{self.arg}> contains markup ({what}) {{at}}: wrap the value in "
            "<![CDATA[ ... ]]>, or escape < as &lt; and > as &gt;.",
        )

    def _done(self) -> bool:
        """Reading stopped at </execute>: only note whether more text came."""
        self.trailing = self._skip_space() < len(self.buf)
        return False

    def _json(self) -> bool:
        """The JSON form, ``[{"name": ..., "args": {...}}]``: follow its strings to the first
        ``</execute>`` outside one (one inside a string is text), then decode the array."""
        buf, n, jp = self.buf, len(self.buf), self.json_at
        while True:
            if self.in_string:
                m = JSON_STRING_RE.match(buf, jp)
                jp = m.end() if m is not None else jp
                if jp >= n or buf[jp] != '"':  # the string (or an escape) runs to the end
                    return False
                self.in_string = False
                jp += 1
                continue
            m = JSON_PLAIN_RE.match(buf, jp)
            jp = m.end() if m is not None else jp
            if jp >= n:
                return False
            c = buf[jp]
            if c == '"':
                self.in_string = True
            elif c == "<":  # the block ends at the first </execute> outside a JSON string
                close = EXEC_CLOSE_RE.match(buf, jp)
                if close is not None:
                    self._end_json(jp)
                    self.pos = self.block_end = close.end()
                    self.state = DONE
                    return True
            jp += 1

    def _end_json(self, end: int) -> None:
        at = self.json_at
        try:
            value = json.loads(self.buf[at:end], parse_constant=reject_constant)
        except json.JSONDecodeError as err:
            raise self.fail(
                at + err.pos,
                "INVALID_JSON",
                f"The JSON in <execute> is invalid {{at}}: {err.msg}. " + JSON_SHAPE,
            ) from None
        except (ValueError, RecursionError) as err:
            raise self.fail(
                at,
                "INVALID_JSON",
                f"The JSON in <execute> {{at}} is invalid ({err}). " + JSON_SHAPE,
            ) from None
        if lone_surrogate(value, self.buf, at, end):
            raise self.fail(
                at, "INVALID_JSON", "The JSON in <execute> {at} escapes a lone surrogate (\\ud800)."
            )
        if not isinstance(value, list):
            raise self.fail(at, "JSON_NOT_ARRAY", "The JSON {at} is not an array. " + JSON_SHAPE)
        if not value:
            raise self.fail(self.exec_pos, "EMPTY_EXECUTE", "<execute> {at} " + EMPTY)
        self.json_items = value

    # ----------------------------------------------------------------- end

    def _end(self, finish_reason: str) -> ScanEnd:
        cut = (
            " The reply was cut off at the token limit: write less (fewer calls, shorter values)."
            if finish_reason == "length"
            else ""
        )
        state, p = self.state, f"call[{len(self.calls)}]:"
        if state == THINK:
            raise self.fail(
                self.mark,
                "UNCLOSED_THINK",
                "<think> opened {at} is never closed: end it with </think>, then write "
                "<execute> or your answer." + cut,
            )
        if state in (BLOCK, JSON_FORM):
            hint = ' A JSON string in it is still open (a missing ").' if self.in_string else ""
            raise self.fail(
                self.exec_pos,
                "UNCLOSED_EXECUTE",
                "<execute> opened {at} is never closed: end the block with </execute>."
                + hint
                + cut,
            )
        if state == TOOL:
            assert self.call is not None
            name = self.call.name
            raise self.fail(
                self.call.pos,
                f"{p}UNCLOSED_TOOL:{name}",
                f"<{name}> opened {{at}} is never closed: add </{name}>." + cut,
            )
        if state == ARG and self.cdata >= 0:
            raise self.fail(
                self.cdata_pos,
                f"{p}UNCLOSED_CDATA:{self.arg}",
                "<![CDATA[ opened {at} is never closed: end it with ]]>." + cut,
            )
        if state == ARG:
            raise self.fail(
                self.mark,
                f"{p}UNCLOSED_ARG:{self.arg}",
                f"<{self.arg}> opened {{at}} is never closed: add </{self.arg}>." + cut,
            )
        think = "\n\n".join(t.strip(WS) for t in self.think) if self.think else None
        if state == DONE:
            return ScanEnd(think, None, self.trailing, tuple(self.notes), self.block_end)
        answer = "".join(self.answer).strip(WS)
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
