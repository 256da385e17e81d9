"""The ``execute`` transport (seed 000): ``<think>`` / ``<execute>`` / ``<results>``.

The model writes an optional ``<think>`` (ignored), then either one ``<execute>``
block of tool calls or, with no block, its final answer. The block is read
strictly: every call's tool, argument names and values are checked before
anything runs (one ``EXECUTE_INVALID`` lists every problem), and reading stops
at the block's ``</execute>`` so the model cannot answer before it has seen the
results. Two forms are accepted inside the block: the seed's elements
(``<tool><arg>value</arg></tool>``, values as text converted by the schema's
types; markup in a value goes in CDATA or is escaped) and the JSON array
``[{"name": ..., "args": {...}}]`` the seed's framework later moved to, because
a value holding ``</execute>`` or HTML breaks element arguments.

One scanner (``_execscan``) serves whole texts and streams: ``parse_execute``
feeds it the text at once, ``ExecuteStreamParser`` chunk by chunk. It never looks
back, so a whole text costs one pass, and any chunking gives the same result.
This module gives the calls their meaning (tools, schemas, typed values) and
renders the prompt side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import ProtocolError
from toolwire.protocols._execscan import EXECUTE_INVALID, RawCall, Scanner, value_text
from toolwire.protocols._textcheck import text_has_lone_surrogate
from toolwire.protocols.stop_reasons import normalize_finish_reason
from toolwire.tools.args import check_args, coerce_value

__all__ = [
    "ANY_TOOL",
    "EXECUTE_INVALID",
    "ExecuteParse",
    "ExecuteStreamParser",
    "ToolLike",
    "describe_tools",
    "execute_parse_to_dict",
    "parse_execute",
    "render_execute",
    "render_execute_instructions",
    "render_results",
    "tool_schemas",
]

Schemas = Mapping[str, Mapping[str, Any] | None]  # tool name -> argument schema
_EMPTY_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}


class _AnyTool(dict[str, Mapping[str, Any] | None]):
    """Every name is a tool with undeclared arguments: a wire-format check without a spec."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> None:
        return None


ANY_TOOL: Schemas = _AnyTool()


class ToolLike(Protocol):
    """What the renderers read of a tool: ``spec.ToolSpec`` or anything shaped like it."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ExecuteParse:
    """One turn: the calls to run in order (empty for a final answer) and what was ignored."""

    calls: list[ToolCall]
    think: str | None = None
    answer: str | None = None  # the final answer: set only when there is no <execute> block
    trailing_text_ignored: bool = False
    warnings: tuple[str, ...] = ()
    # Index just past the block's closing </execute> (None for an answer): the part of
    # the reply that was read. A regex cannot find it: </execute> may sit in a CDATA
    # value or a JSON string before the real end.
    block_end: int | None = None


def execute_parse_to_dict(parsed: ExecuteParse) -> dict[str, Any]:
    """JSON-able form (``toolwire parse``, test vectors)."""
    return {
        "calls": [
            {"id": c.id, "tool": c.tool, "args": c.args, "source": c.source} for c in parsed.calls
        ],
        "think": parsed.think,
        "answer": parsed.answer,
        "trailing_text_ignored": parsed.trailing_text_ignored,
        "warnings": list(parsed.warnings),
    }


# ---------------------------------------------------------------- rendering


def tool_schemas(tools: Sequence[ToolLike]) -> dict[str, Mapping[str, Any]]:
    """Tool name -> argument schema, the shape ``parse_execute`` and ``parse_decision`` take."""
    return {t.name: t.args for t in tools}


def _type_name(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    text = "/".join(kind) if isinstance(kind, list) else str(kind or "any")
    if isinstance(schema.get("enum"), list):
        text += ", one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return text


def describe_tools(tools: Sequence[ToolLike]) -> str:
    """One paragraph per tool: name, description, each argument with type and whether required."""
    out = []
    for t in tools:
        props = t.args.get("properties") or {}
        required = set(t.args.get("required") or ())
        out.append(f"- {t.name}: {t.description.strip()}")
        for name, sub in props.items():
            sub = sub if isinstance(sub, Mapping) else {}
            need = "required" if name in required else "optional"
            desc = str(sub.get("description", "")).strip()
            out.append(f"    {name} ({_type_name(sub)}, {need})" + (f": {desc}" if desc else ""))
        if not props:
            out.append("    (no arguments)")
    return "\n".join(out)


def render_execute_instructions(tools: Sequence[ToolLike]) -> str:
    """How to call tools in this transport, with the tool list; goes in the system prompt."""
    first = tools[0] if tools else None
    name = first.name if first else "tool_name"
    arg_names = list((first.args.get("properties") or {}) if first else ["argument"])[:2]
    example_args = "".join(f"<{a}>...</{a}>" for a in arg_names)
    json_args = ", ".join(f'"{a}": "..."' for a in arg_names)
    return f"""\
Each reply: optionally think inside <think>...</think> (the system ignores it), then EITHER
call tools in one <execute> block OR, when the task is done, write your final answer as plain
text with no <execute> block.

To call tools:
<execute>
<{name}>{example_args}</{name}>
</execute>

Rules:
- One element per call, named after the tool; inside it one element per argument, named
  after the argument. No attributes. Calls run one after another in the order written; a
  failed call does not stop the next ones; the same tool may appear several times.
- Every call is checked before any runs: an unknown tool, an unknown or missing argument or
  a value of the wrong type rejects the whole block.
- Write numbers and true/false as plain text (<limit>5</limit>), arrays and objects as JSON
  (<tags>["a", "b"]</tags>). Text keeps its spaces; a newline right after the opening tag
  and right before the closing tag is layout and is dropped.
- A value containing <, > or & (HTML, XML, code, the text </execute>) must be made safe:
  wrap it in <![CDATA[ ... ]]> (taken literally), or escape it: &lt; for <, &gt; for >,
  &amp; for &.
- Instead of elements you may write one JSON array in the block:
  <execute>[{{"name": "{name}", "args": {{{json_args}}}}}]</execute>
  (JSON strings may hold any text, </execute> included.)
- Stop writing after </execute>. The system runs the calls and answers with
  <results>[{{"tool": ..., "status": "success" or "failure", "content": ...}}]</results>,
  one entry per call in the same order. Never write <results> yourself.

Tools:
{describe_tools(tools)}
"""


def _result_json(result: ToolResult) -> str:
    item = {"tool": result.tool, "status": result.status, "content": result.content}
    try:  # default=str: a value JSON cannot hold (a date, a Path) reaches the model as text
        text = json.dumps(item, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # e.g. non-string keys, circular data
        text = json.dumps({**item, "content": str(result.content)}, ensure_ascii=False)
    # "</" only occurs inside JSON strings, where "<\/" is the same text: a note that
    # holds "</results>" then cannot close the block early (or look like a tag at all).
    return text.replace("</", "<\\/")


def render_results(results: Sequence[ToolResult]) -> str:
    """The system's ``<results>`` block: a JSON array in execution order, one item per line."""
    items = [_result_json(r) for r in results]
    if not items:
        return "<results>\n[]\n</results>"
    return "<results>\n[\n" + ",\n".join(f"  {item}" for item in items) + "\n]\n</results>"


def _escape_value(value: Any) -> str:
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if not isinstance(value, str):
        return text  # JSON text: entities are decoded before it is read as JSON
    # Keep a leading or trailing newline as value: add the one newline the parser drops.
    if text.startswith(("\n", "\r\n")):
        text = "\n" + text
    if text.rstrip(" \t").endswith("\n"):
        text += "\n"
    return text


def render_execute(calls: Sequence[ToolCall], *, think: str | None = None) -> str:
    """The block a well-behaved model writes for ``calls`` (replay scripts, round trips).

    Values are escaped (``&lt;``, ``&gt;``, ``&amp;``) rather than put in CDATA,
    which cannot hold ``]]>``; values other than strings are written as JSON.
    """
    out = [f"<think>{think}</think>"] if think is not None else []
    out.append("<execute>")
    for call in calls:
        args = "".join(f"<{k}>{_escape_value(v)}</{k}>" for k, v in call.args.items())
        out.append(f"<{call.tool}>{args}</{call.tool}>")
    out.append("</execute>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ parsing


def _arg_problems(
    args: dict[str, Any], schema: Mapping[str, Any], tool: str, index: int
) -> list[tuple[str, str]]:
    """Detail codes and model-facing lines from the shared argument checker (toolwire.tools)."""
    lines = []
    for p in check_args(args, schema):
        if p.code == "MISSING_ARG":
            line = f"call[{index}] <{tool}>: the required argument {p.arg!r} is missing: add it."
        else:
            who = f"call[{index}] <{tool}>" + (f" argument {p.arg!r}" if p.arg is not None else "")
            line = f"{who}: {p.message}."
        lines.append((f"call[{index}]:{p.detail}", line))
    return lines


class _Calls:
    """The scanner's sink: checks each call against the tools, keeps the valid ones
    and collects every problem (detail code, a line for the model, a position)."""

    def __init__(self, tools: Schemas, id_prefix: str) -> None:
        self.tools = tools
        self.id_prefix = id_prefix
        self.calls: list[ToolCall] = []
        self.details: list[str] = []
        self.lines: list[str] = []
        self.first = -1  # position of the first problem

    def _problem(self, pos: int, detail: str, line: str) -> None:
        if self.first < 0:
            self.first = pos
        self.details.append(detail)
        self.lines.append(line)

    def _schema(self, name: str, index: int, pos: int) -> Mapping[str, Any] | None:
        if name in self.tools:
            return self.tools[name] or _EMPTY_SCHEMA
        known = ", ".join(self.tools) or "none"
        line = f"call[{index}]: {name!r} is not a tool; the tools are: {known}."
        self._problem(pos, f"UNKNOWN_TOOL:{name}", line)
        return None

    def element(self, call: RawCall) -> ToolCall | None:
        """An element-form call: values converted from text by their property's type."""
        index = call.index
        schema = self._schema(call.name, index, call.pos)
        if schema is None:
            return None
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        extra = schema.get("additionalProperties")
        args: dict[str, Any] = {}
        ok = True
        for name, pos, pieces in call.args:
            if name in args:
                ok = False
                line = f"call[{index}] <{call.name}>: <{name}> is given twice: give it once."
                self._problem(pos, f"call[{index}]:DUPLICATE_ARG:{name}", line)
                continue
            sub = props.get(name, extra)
            text = value_text(pieces)
            if not text.isascii() and text_has_lone_surrogate(text):
                # A provider's JSON decoder can hand us one ("\\ud800"): no tool, file
                # or store can encode it, so it is refused here like its JSON escape.
                ok = False
                line = f"call[{index}] <{call.name}>: <{name}> holds a lone surrogate: remove it."
                self._problem(pos, f"call[{index}]:INVALID_CHARACTER:{name}", line)
                args[name] = text  # present, so the schema check does not call it missing
                continue
            args[name] = coerce_value(text, sub) if isinstance(sub, Mapping) else text
        for detail, line in _arg_problems(args, schema, call.name, index):
            ok = False
            self._problem(call.pos, detail, line)
        if not ok:
            return None
        tool_call = ToolCall(f"{self.id_prefix}-{index + 1}", call.name, args, "xml")
        self.calls.append(tool_call)
        return tool_call

    def json_item(self, item: Any, index: int, at: int, record: bool) -> ToolCall | None:
        """One item of the JSON form, ``{"name": ..., "args": {...}}``; values as JSON typed them.

        ``record`` is False for a streaming preview: checked, neither kept nor reported.
        """
        p, who = f"call[{index}]:", f"call[{index}]"
        problems: list[tuple[str, str]] = []
        call = None
        if not isinstance(item, dict):
            problems.append((p + "NOT_AN_OBJECT", f'{who} is not an object {{"name", "args"}}.'))
        else:
            problems += [
                (f"{p}UNKNOWN_KEY:{key}", f'{who} has the key "{key}": use only "name", "args".')
                for key in item
                if key not in ("name", "args")
            ]
            name, args = item.get("name"), item.get("args", {})
            if not isinstance(name, str):
                code = "MISSING_KEY" if "name" not in item else "WRONG_TYPE"
                problems.append((f"{p}{code}:name", f'{who}: "name" must be the tool name.'))
            if not isinstance(args, dict):
                problems.append((p + "WRONG_TYPE:args", f'{who}: "args" must be a JSON object.'))
            if not problems and isinstance(name, str) and isinstance(args, dict):
                schema = self._schema(name, index, at) if record else self.tools.get(name, None)
                if name in self.tools:
                    problems = _arg_problems(args, schema or _EMPTY_SCHEMA, name, index)
                    if not problems:
                        call = ToolCall(f"{self.id_prefix}-{index + 1}", name, args, "json")
        if record:
            for detail, line in problems:
                self._problem(at, detail, line)
            if call is not None:
                self.calls.append(call)
        return call

    def error(self, scanner: Scanner) -> ProtocolError:
        """Every problem in one error, located at the first; nothing in the block may run."""
        first = scanner.fail(self.first, "", "")
        return ProtocolError(
            EXECUTE_INVALID,
            "Nothing ran; fix every call and send the whole block again:\n" + "\n".join(self.lines),
            first.line,
            first.column,
            list(self.details),
        )


def _internal(exc: Exception) -> ProtocolError:
    # A bug of ours must still reach the engine as a protocol failure it can record.
    return ProtocolError(
        EXECUTE_INVALID,
        f"The parser failed on this reply ({type(exc).__name__}); rewrite the <execute> block.",
        details=[f"PARSER_ERROR:{type(exc).__name__}"],
    )


def _as_text(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                EXECUTE_INVALID,
                f"The reply is not valid UTF-8 (byte {exc.start}): send UTF-8 text.",
                details=["INVALID_ENCODING"],
            ) from None
    if not isinstance(text, str):
        raise ProtocolError(
            EXECUTE_INVALID, f"Expected text, got {type(text).__name__}.", details=["NOT_TEXT"]
        )
    return text


class ExecuteStreamParser:
    """``parse_execute`` for a streamed reply, fed in chunks of any size.

    ``feed`` returns each call as soon as it closes (``</tool>`` in the element
    form, the item's ``}`` in the JSON form) if that call alone is valid: for
    display and progress only. Run nothing before ``finish``: it returns what
    ``parse_execute`` returns for the whole text, or raises the same error, as
    the batch is valid only as a whole. ``closed`` turns true at ``</execute>``;
    the caller may stop the generation there (what follows is ignored anyway).
    """

    def __init__(self, tools: Schemas, *, id_prefix: str = "call", _stream: bool = True) -> None:
        # _stream=False (parse_execute): nobody reads feed's return, so skip JSON previews.
        self._calls = _Calls(tools, id_prefix)
        self._scanner = Scanner(self._calls, stream=_stream)

    @property
    def closed(self) -> bool:
        return self._scanner.closed

    def feed(self, chunk: str | bytes) -> list[ToolCall]:
        """Read more text; return the calls that closed in it (raises at a structural error)."""
        try:
            return self._scanner.feed(_as_text(chunk))
        except ProtocolError:
            raise
        except Exception as exc:  # never let a bare exception escape on untrusted input
            self._scanner.error = _internal(exc)
            raise self._scanner.error from exc

    def finish(self, finish_reason: str = "stop") -> ExecuteParse:
        """The reply is complete: the whole turn, exactly as ``parse_execute`` reads it."""
        scanner, calls = self._scanner, self._calls
        try:
            end = scanner.finish(normalize_finish_reason(finish_reason))
            if calls.details and end.answer is None:
                scanner.error = calls.error(scanner)
                raise scanner.error
        except ProtocolError:
            raise
        except Exception as exc:
            scanner.error = _internal(exc)
            raise scanner.error from exc
        if end.answer is not None:
            return ExecuteParse([], end.think, end.answer, False, end.notes)
        return ExecuteParse(list(calls.calls), end.think, None, end.trailing, end.notes, end.end)


def parse_execute(
    text: str | bytes,
    *,
    tools: Schemas,
    finish_reason: str = "stop",
    id_prefix: str = "call",
) -> ExecuteParse:
    """Read one reply (seed 000): the checked calls of its ``<execute>`` block, or its answer.

    ``tools`` maps each tool name to its argument schema. Raises ``ProtocolError``
    (``EXECUTE_INVALID``) only: a structural problem at its first occurrence (line
    and column), or every call problem at once (``UNKNOWN_TOOL:x``,
    ``call[i]:MISSING_ARG:a``, ...), so nothing runs unless every call is valid.
    Call ids are ``{id_prefix}-1``, ``{id_prefix}-2``, ... in block order.
    """
    parser = ExecuteStreamParser(tools, id_prefix=id_prefix, _stream=False)
    parser.feed(text)
    return parser.finish(finish_reason)
