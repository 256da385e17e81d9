"""Tool arguments: convert text values by the schema's types, then check them strictly.

Transports that carry arguments as text (``execute``'s ``<arg>value</arg>``)
call :func:`coerce_args` first; every transport then goes through
:func:`check_args` before a tool runs. ``jsonschema`` is the judge, with JSON
Schema's own semantics: an argument the schema does not declare is accepted
unless the schema says ``additionalProperties: false`` (then it is
``UNKNOWN_ARG``, named, with the known ones listed). The built-in tools say
so in their schemas: a Python function takes only the names it declares.

Problems carry seed-000-style codes (``MISSING_ARG``, ``UNKNOWN_ARG``,
``INVALID_VALUE``) so a parser can prefix them (``call[1]:MISSING_ARG:path``)
and the model reads the same words in every transport.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

__all__ = [
    "INVALID_VALUE",
    "MISSING_ARG",
    "UNKNOWN_ARG",
    "ArgProblem",
    "arg_problems",
    "check_args",
    "coerce_args",
    "coerce_value",
    "format_problems",
]

MISSING_ARG = "MISSING_ARG"
UNKNOWN_ARG = "UNKNOWN_ARG"
INVALID_VALUE = "INVALID_VALUE"

_INTEGER = re.compile(r"[+-]?\d+\Z")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z")
_NO_VALUE = object()


@dataclass(frozen=True, slots=True)
class ArgProblem:
    """One thing wrong with a call's arguments, located by argument name."""

    code: str  # MISSING_ARG | UNKNOWN_ARG | INVALID_VALUE
    arg: str | None  # None: the arguments object as a whole
    message: str

    @property
    def detail(self) -> str:
        """The machine code, ``CODE:arg`` (``CODE`` alone for the whole object)."""
        return f"{self.code}:{self.arg}" if self.arg is not None else self.code

    def __str__(self) -> str:
        return f"{self.detail} ({self.message})"


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _convert(text: str, kind: str) -> Any:
    """``text`` as a value of JSON type ``kind``, or _NO_VALUE when it is not one."""
    value = text.strip()
    if kind == "integer":
        return int(value) if _INTEGER.match(value) else _NO_VALUE
    if kind == "number":
        if _INTEGER.match(value):
            return int(value)
        if _NUMBER.match(value):
            number = float(value)
            return number if math.isfinite(number) else _NO_VALUE
        return _NO_VALUE
    if kind == "boolean":
        return {"true": True, "false": False}.get(value.lower(), _NO_VALUE)
    if kind == "null":
        return None if value in ("", "null") else _NO_VALUE
    if kind in ("array", "object"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return _NO_VALUE
        wanted = list if kind == "array" else dict
        return parsed if isinstance(parsed, wanted) else _NO_VALUE
    return _NO_VALUE


def coerce_value(value: Any, schema: Mapping[str, Any]) -> Any:
    """A text ``value`` converted to the first type of ``schema`` it reads as.

    Only strings are converted, and never when the schema accepts a string
    (a path like ``"007"`` stays text). A string that fits none of the types is
    returned unchanged, so :func:`check_args` reports it with the schema's words.
    """
    if not isinstance(value, str):
        return value
    kinds = _types(schema)
    if not kinds or "string" in kinds:
        return value
    for kind in kinds:
        converted = _convert(value, kind)
        if converted is not _NO_VALUE:
            return converted
    return value


def coerce_args(args: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments whose text values are converted by their property's declared type.

    Unknown names pass through untouched (``check_args`` reports them).
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(args)
    out: dict[str, Any] = {}
    for name, value in args.items():
        prop = properties.get(name)
        out[name] = coerce_value(value, prop) if isinstance(prop, Mapping) else value
    return out


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    return Draft202012Validator(json.loads(schema_json))


def check_args(args: Any, schema: Mapping[str, Any]) -> list[ArgProblem]:
    """Every problem with ``args`` against ``schema`` (empty list: the call may run).

    Missing and unknown names come first, in schema / argument order, then
    value errors from JSON Schema (one per argument, its first error).
    """
    if not isinstance(args, Mapping):
        return [ArgProblem(INVALID_VALUE, None, "arguments must be a JSON object")]
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    problems: list[ArgProblem] = []
    for name in schema.get("required") or ():
        if name not in args:
            problems.append(ArgProblem(MISSING_ARG, name, f"{name!r} is required"))
    closed = schema.get("additionalProperties") is False
    patterns = schema.get("patternProperties")
    patterns = [p for p in patterns if isinstance(p, str)] if isinstance(patterns, Mapping) else []
    for name in args:
        if closed and name not in properties and not _matches_any(patterns, name):
            known = ", ".join(properties) or "none"
            problems.append(ArgProblem(UNKNOWN_ARG, name, f"unknown argument; known: {known}"))
    reported = {p.arg for p in problems}
    validator = _validator(json.dumps(schema, sort_keys=True))
    for error in sorted(validator.iter_errors(dict(args)), key=lambda e: list(e.path)):
        if error.validator in ("required", "additionalProperties") and not error.path:
            continue  # top-level ones are reported above, with the argument's name
        arg = str(error.path[0]) if error.path else None
        if arg in reported:
            continue
        reported.add(arg)
        problems.append(ArgProblem(INVALID_VALUE, arg, _short(error.message)))
    return problems


def _matches_any(patterns: list[str], name: str) -> bool:
    """Whether ``name`` matches one of the schema's ``patternProperties`` (regex search)."""
    for pattern in patterns:
        try:
            if re.search(pattern, name):
                return True
        except re.error:
            continue  # the validator reports a broken pattern itself
    return False


def arg_problems(
    args: dict[str, Any], schema: Mapping[str, Any], who: str
) -> list[tuple[str, str]]:
    """(detail code, line for the model) per problem ``check_args`` finds: the lines a model
    reads in the transports that check every call before any runs (``execute``, ``xct``)."""
    lines = []
    for p in check_args(args, schema):
        if p.code == "MISSING_ARG":
            line = f"{who}: the required argument {p.arg!r} is missing: add it."
        else:
            arg = f" argument {p.arg!r}" if p.arg is not None else ""
            line = f"{who}{arg}: {p.message}."
        lines.append((p.detail, line))
    return lines


def format_problems(problems: list[ArgProblem]) -> str:
    """Problems as one line for a failure result the model reads."""
    return "; ".join(str(p) for p in problems)


def _short(message: str, limit: int = 160) -> str:
    # jsonschema quotes the whole offending value: a long file body would flood the prompt.
    return message if len(message) <= limit else message[: limit - 1] + "…"
