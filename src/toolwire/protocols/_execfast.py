"""Whole-text fast path for seed 000's ``<execute>`` block: a well-formed reply in bulk.

The scanner (``_execscan``) takes a Python step per tag and per argument value,
which is what a stream needs. A whole reply in the usual shape (an optional
``<think>`` block, then ``<execute>`` holding element-form calls whose values
hold no ``<``, every call valid for a plain schema) is read here with one
``split`` for the calls and one ``findall`` per call. ``fast_execute`` returns
exactly what the scanner returns for such a reply, and None for anything else
(CDATA, markup or ``<`` in a value, the JSON form, attributes, an unknown tool,
an argument that does not fit its schema, ...): the caller then runs the
scanner, which also reports the problems. The vectors and a property test
check both paths against each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import chain, compress, count, islice, repeat
from operator import not_, sub
from typing import Any

from toolwire.domain import ToolCall
from toolwire.protocols._bulk import constructor, tool_calls
from toolwire.protocols._execargs import Plan, call_plan, is_type
from toolwire.protocols._tagscan import MAX_INPUT_BYTES, unescape_text
from toolwire.protocols._textcheck import text_has_lone_surrogate
from toolwire.tools.args import coerce_value

__all__ = ["FastExecute", "fast_execute", "layout_value"]

_WS = " \t\r\n"
_S = r"[ \t\r\n]*+"
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*+"
_CALL = rf"<({_NAME})>{_S}((?:<({_NAME})>([^<]*+)</\{{a}}>{_S})++)</\{{t}}>"
# The whole reply read by the fast path: text without markup, maybe one think block (its
# text runs to the first </think>) and more text, then <execute> holding only calls, each
# a <tool> with one or more <arg>value</arg> (a value holds no "<", so its closing tag is
# the first "</" after it), whitespace between the tags. Groups: 1 text before, 2 think,
# 3 text after it, 4 the calls, 5-8 the last call's tool, arguments, last argument name
# and value, 9 the end of </execute>.
_REPLY_RE = re.compile(
    r"([^<]*+)(?:<think>((?:[^<]++|<(?!/think>))*+)</think>([^<]*+))?+<execute>"
    + _S
    + rf"((?:{_CALL.format(t=5, a=7)}{_S})++)</execute>()"
)
# On the calls of a matched reply: each argument, with its tool's name if it opens a call.
# (An opening tool tag is followed by blanks and another tag, never by "</": it cannot be
# read as an argument.)
# Written to start with a literal "<", which the regex engine searches for in C.
_PAIR_RE = re.compile(rf"<(?:({_NAME})>{_S}<)?({_NAME})>([^<]*+)</\2>")
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}
_IGNORED_BEFORE = "ignored the text before <execute>"

# (calls, think, notes, trailing text?, index just past </execute>)
FastExecute = tuple[list[Any], str | None, tuple[str, ...], bool, int]
_WHOLE = (("integer",), ("number",))
# A tool's schema object, plan, (tool, text property) pairs, (tool, required) pairs, and
# how many are required.
_Entry = tuple[Mapping[str, Any], Plan, frozenset[Any], frozenset[Any], int]
_ENTRIES: dict[tuple[str, int], _Entry] = {}
_IDS: dict[str, list[str]] = {}
_new_call = constructor(ToolCall)
_BAD = object()  # a value that does not fit its schema


def layout_value(raw: str) -> str:
    """``_execscan.value_text`` of a value that is one run of text (no CDATA): one
    newline after the opening tag and one newline plus indentation before the closing
    tag are layout; then entities are decoded."""
    if "\n" in raw:
        if raw.startswith("\n"):
            raw = raw[1:]
        elif raw.startswith("\r\n"):
            raw = raw[2:]
        tail = raw.rstrip(" \t")
        if tail.endswith("\n"):
            raw = tail[:-2] if tail.endswith("\r\n") else tail[:-1]
    return unescape_text(raw) if "&" in raw else raw


def _convert(value: str, spec: tuple[Any, ...]) -> Any:
    """A value that is not plain text, converted by its schema as the scanner's sink does
    (``coerce_value``), or ``_BAD`` when it does not fit its type."""
    sub, types, items = spec
    if types in _WHOLE and value.isdigit() and value.isascii():
        return int(value)  # what coerce_value makes of plain digits, without its steps
    converted = coerce_value(value, sub)
    if not is_type(converted, types):
        return _BAD
    if items is not None and not all(is_type(item, items) for item in converted):
        return _BAD
    return converted


def _entry(tools: Mapping[str, Any], name: str) -> _Entry | None:
    """What the checks need of one tool, cached by name and schema object."""
    if name not in tools:
        return None  # UNKNOWN_TOOL: the scanner's sink words it
    schema = tools[name] or _EMPTY_SCHEMA
    hit = _ENTRIES.get((name, id(schema)))
    if hit is not None and hit[0] is schema:
        return hit
    if type(schema) is not dict and not isinstance(schema, Mapping):
        return None
    plan = call_plan(schema)
    if plan is None:
        return None
    if len(_ENTRIES) > 512:
        _ENTRIES.clear()
    pairs = frozenset(zip(repeat(name), plan[0]))
    required = frozenset(zip(repeat(name), plan[2]))
    entry = _ENTRIES[name, id(schema)] = (schema, plan, pairs, required, len(required))
    return entry


def _values(tools: Mapping[str, Any], names: list[str], keys: list[Any], raws: Any) -> Any:
    """The argument values, typed, if every (tool, argument) in ``keys`` is plainly valid:
    a property of its tool with a value of its type, each call with its required ones."""
    entries: dict[str, _Entry] = {}
    texts: set[Any] = set()
    required: set[Any] = set()
    need = {}
    for name in set(names):
        entry = _entry(tools, name)
        if entry is None:
            return None
        entries[name] = entry
        texts |= entry[2]
        required |= entry[3]
        need[name] = entry[4]
    if required and sum(map(required.__contains__, keys)) != sum(map(need.__getitem__, names)):
        return None  # a required argument is missing (repeated ones are caught later)
    values = [layout_value(v) if "\n" in v or "&" in v else v for v in raws]
    if not texts.issuperset(keys):
        for i in compress(count(), map(not_, map(texts.__contains__, keys))):
            name, arg = keys[i]
            spec = entries[name][1][1].get(arg)
            value = _BAD if spec is None else _convert(values[i], spec)
            if value is _BAD:
                return None  # not a property, or the wrong type
            values[i] = value
    return values


def _one(tools: Mapping[str, Any], tool: str, arg: str, raw: str) -> dict[str, Any] | None:
    """The arguments of a reply's one call with one argument (the commonest reply)."""
    if not raw.isascii() and text_has_lone_surrogate(raw):
        return None
    entry = _entry(tools, tool)
    if entry is None or entry[4] > 1 or (entry[4] and (tool, arg) not in entry[3]):
        return None  # a required argument is missing
    plan = entry[1]
    value: Any = layout_value(raw) if "\n" in raw or "&" in raw else raw
    if arg not in plan[0]:
        spec = plan[1].get(arg)
        value = _BAD if spec is None else _convert(value, spec)
        if value is _BAD:
            return None
    return {arg: value}


def _many(tools: Mapping[str, Any], body: str, id_prefix: str) -> list[ToolCall] | None:
    """The calls of a reply's block (``body``: calls and whitespace only), column by
    column so that the work per call is done in C."""
    if not body.isascii() and text_has_lone_surrogate(body):
        return None
    # One item per argument; the first of each call carries the tool's name.
    opened, arg_names, raws = zip(*_PAIR_RE.findall(body), strict=True)
    starts = list(compress(count(), opened))
    counts = list(map(sub, [*starts[1:], len(opened)], starts))
    names = list(filter(None, opened))
    keys = list(zip(chain.from_iterable(map(repeat, names, counts)), arg_names, strict=True))
    values = _values(tools, names, keys, raws)
    if values is None:
        return None
    flat = iter(zip(arg_names, values, strict=True))
    args = list(map(dict, map(islice, repeat(flat), counts)))
    if sum(map(len, args)) != len(keys):
        return None  # an argument given twice
    return tool_calls(_ids(id_prefix, len(names)), names, args, "xml")


def _ids(prefix: str, n: int) -> list[str]:
    """``prefix-1`` ... ``prefix-n``, kept per prefix (the same ones every turn)."""
    ids = _IDS.get(prefix)
    if ids is None or len(ids) < n:
        if len(_IDS) > 64:
            _IDS.clear()
        ids = _IDS[prefix] = [f"{prefix}-{i}" for i in range(1, max(n, 64) + 1)]
    return ids[:n]


def fast_execute(text: str, tools: Mapping[str, Any], id_prefix: str) -> FastExecute | None:
    """The scanner's reading of a well-formed element-form reply, or None."""
    m = _REPLY_RE.match(text)
    if m is None or len(text) * 4 > MAX_INPUT_BYTES:
        return None
    before, think, after, body, tool, _, arg, raw, _ = m.groups()
    if body.count("</") == 2:  # one call, one argument
        args = _one(tools, tool, arg, raw)
        if args is None:
            return None
        calls = [_new_call(id_prefix + "-1", tool, args, "xml", None)]
    else:
        many = _many(tools, body, id_prefix)
        if many is None:
            return None
        calls = many
    end = m.end()
    other = (before and before.strip(_WS)) or (after and after.strip(_WS))
    if think is not None:
        think = think.strip(_WS)
    notes = (_IGNORED_BEFORE,) if other else ()
    return calls, think, notes, bool(text[end:].strip(_WS)), end
