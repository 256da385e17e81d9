"""Argument checks for ``execute`` calls whose schema only names properties and types.

Argument checking is jsonschema's job (``toolwire.tools.args.check_args``), at
~100 us a call. Most tool schemas only name properties and their JSON types;
for those a valid call is recognised here in a few microseconds. Anything
else, and every call with a problem, goes to ``check_args``, so the outcome is
always ``check_args``'s. Shared by the scanner's sink (``execute._Calls``) and
the whole-text fast path (``_execfast``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Plan", "call_plan", "is_type", "plainly_valid"]

_PLAIN_KEYS = frozenset(("type", "description", "title", "default", "examples"))
_PLAIN_TOP = frozenset(("type", "properties", "required", "additionalProperties", "description",
                        "title", "$schema"))  # fmt: skip
_JSON_TYPES: dict[str, Any] = {"string": str, "boolean": bool, "array": list, "object": dict,
                               "null": type(None)}  # fmt: skip
_Plain = tuple[dict[str, tuple[tuple[Any, ...], tuple[Any, ...] | None]], tuple[str, ...]]
# What the fast path needs of a plain schema: the properties any text satisfies (their
# types include "string", so the text is kept as is), the others by name with their
# schema, types and item types (converted by coerce_value, then type-checked), and the
# required names.
Plan = tuple[
    frozenset[str],
    dict[str, tuple[Mapping[str, Any], tuple[Any, ...], tuple[Any, ...] | None]],
    frozenset[str],
]
_CACHE: dict[int, tuple[Mapping[str, Any], _Plain | None, Plan | None]] = {}


def _types(schema: Any) -> tuple[Any, ...] | None:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if not kinds or any(k not in _JSON_TYPES and k not in ("integer", "number") for k in kinds):
        return None
    return tuple(kinds)


def _plain(schema: Mapping[str, Any]) -> _Plain | None:
    """Property -> (types, item types) and the required names, if the schema is that simple."""
    props = schema.get("properties", {})
    if not set(schema) <= _PLAIN_TOP or schema.get("type") != "object":
        return None
    if not isinstance(props, Mapping) or not isinstance(schema.get("required", []), list):
        return None
    out = {}
    for name, sub in props.items():
        types = _types(sub)
        if types is None or not set(sub) <= _PLAIN_KEYS | {"items"}:
            return None
        items = None
        if "items" in sub:
            items = _types(sub["items"])
            if items is None or not set(sub["items"]) <= _PLAIN_KEYS or types != ("array",):
                return None
        out[name] = (types, items)
    return out, tuple(schema.get("required", ()))


def _plan(schema: Mapping[str, Any], plain: _Plain | None) -> Plan | None:
    if plain is None:
        return None
    props, required = plain
    if not all(isinstance(name, str) for name in required):
        return None
    texts = frozenset(name for name, (types, _) in props.items() if "string" in types)
    others = {
        name: (schema["properties"][name], types, items)
        for name, (types, items) in props.items()
        if name not in texts
    }
    return texts, others, frozenset(required)


def _cached(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], _Plain | None, Plan | None]:
    hit = _CACHE.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_CACHE) > 512:
            _CACHE.clear()
        plain = _plain(schema)
        hit = _CACHE[id(schema)] = (schema, plain, _plan(schema, plain))
    return hit


def is_type(value: Any, types: tuple[Any, ...]) -> bool:
    """Is ``value`` one of the JSON ``types`` (booleans are not numbers)?"""
    for kind in types:
        if kind == "integer":
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif kind == "number":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return True
        elif isinstance(value, _JSON_TYPES[kind]):
            return True
    return False


def plainly_valid(args: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """True only if ``check_args`` would find nothing wrong (False: ask it)."""
    plain = _cached(schema)[1]
    if plain is None:
        return False
    props, required = plain
    for name, value in args.items():
        spec = props.get(name)
        if spec is None or not is_type(value, spec[0]):
            return False
        if spec[1] is not None and not all(is_type(item, spec[1]) for item in value):
            return False
    return all(name in args for name in required)


def call_plan(schema: Mapping[str, Any]) -> Plan | None:
    """The fast path's view of a plain schema (None: not plain, leave the call to the scanner)."""
    hit = _CACHE.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[2]
    return _cached(schema)[2]
