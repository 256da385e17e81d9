"""JSON Schema constraints: which constraint a run uses, and how each server receives one.

``model.constrain`` asks for constrained decoding; what is sent depends on what
the model server takes (the README's table):

* ``grammar`` (default): the GBNF grammar where the server takes one (the
  in-process llama.cpp, llama.cpp's server, vLLM), else the JSON Schema of the
  reply where the server takes that (OpenAI, Ollama), else nothing.
* ``json_schema``: the JSON Schema wherever a server takes one, even where a
  grammar could travel (a vLLM backend without GBNF, or to compare the two).
* ``none``: nothing.

A JSON Schema exists only for the JSON transports: ``xct`` (the schema of one
decision, ``protocols.xct.decision_schema``) and the native tool calls
(their ``parameters``, made ``strict`` for OpenAI where they qualify). The
XML transports have no JSON to constrain: they get a grammar or nothing.

How the schema of a reply travels (``response_format`` is a top-level field):

* OpenAI: ``{"type": "json_schema", "json_schema": {name, schema, strict}}``;
  ``strict`` only when the schema is in the subset strict mode takes (see
  :func:`strict_schema`), else OpenAI reads the schema as guidance.
* vLLM and Ollama: the same shape without ``strict`` (vLLM's structured
  outputs and Ollama's ``format`` constrain to any JSON Schema).
* llama.cpp: ``{"type": "json_object", "schema": ...}``, the one shape both
  llama-cpp-python's server and llama.cpp's ``llama-server`` read.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "Constraint",
    "constraint_for",
    "response_format",
    "schema_name",
    "strict_schema",
    "strict_tools",
]

Constraint = Literal["grammar", "json_schema"]

# OpenAI's model servers that take a GBNF grammar (openai_compat._GRAMMAR_FIELDS).
_GRAMMAR_SERVERS = ("llamacpp", "vllm")

# JSON Schema keywords OpenAI's strict mode accepts (its "supported schemas" list);
# a schema using any other (minLength, default, ...) is sent without strict.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum",
        "const", "anyOf", "description", "title", "$ref", "$defs", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minItems", "maxItems", "format",
    }
)  # fmt: skip
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
# Strict mode's nesting limit is 10 levels of objects; counting every schema level
# (arrays, anyOf) is stricter, and keeps a hostile spec's deep schema off the stack.
_STRICT_MAX_DEPTH = 10


def constraint_for(
    constrain: str, provider: Any = None, model_cfg: Any = None
) -> Constraint | None:
    """The constraint a run's requests carry, from ``model.constrain`` and the provider.

    Without a provider (``toolwire render``), the model config says what the server
    would take: an ``openai:`` model by its ``server``; the in-process llama.cpp and
    replays as if a grammar could travel (what ``render`` has always shown).
    """
    if constrain == "none":
        return None
    if provider is not None:
        grammar = bool(getattr(provider, "supports_grammar", False))
        schema = bool(getattr(provider, "supports_json_schema", False))
    else:
        name = str(getattr(model_cfg, "name", "") or "")
        server = str(getattr(model_cfg, "server", "openai") or "openai")
        grammar = not name.startswith("openai:") or server in _GRAMMAR_SERVERS
        schema = True
    if constrain == "grammar":
        return "grammar" if grammar else "json_schema" if schema else None
    return "json_schema" if schema else None


def schema_name(schema: Mapping[str, Any], default: str = "reply") -> str:
    """A name for ``response_format.json_schema.name`` (``[A-Za-z0-9_-]{1,64}``)."""
    title = schema.get("title")
    name = _NAME.sub("_", title).strip("_") if isinstance(title, str) else ""
    return (name or default)[:64]


def response_format(server: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``response_format`` that asks ``server`` for a reply matching ``schema``."""
    if server == "llamacpp":
        return {"type": "json_object", "schema": dict(schema)}
    body: dict[str, Any] = {"name": schema_name(schema), "schema": dict(schema)}
    if server == "openai":
        strict = strict_schema(schema)
        body["strict"] = strict is not None
        if strict is not None:
            body["schema"] = strict
    return {"type": "json_schema", "json_schema": body}


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of ``schema`` for OpenAI's strict mode, or None when it does not qualify.

    Strict mode wants an object at the root, every property of every object in
    its ``required`` and no other property allowed: a schema with an optional
    property, ``additionalProperties`` other than false, or a keyword outside
    the strict subset, or nesting past 10 levels, does not qualify (making it
    qualify would change what the tool accepts). ``additionalProperties: false``
    is added where it is missing: that only narrows what the model may write,
    never what the tool accepts.
    """
    if schema.get("type") != "object":
        return None
    try:
        copied = copy.deepcopy(dict(schema))
    except RecursionError:  # nested past the stack: far past strict mode's limit
        return None
    return copied if _make_strict(copied) else None


def _make_strict(node: Any, depth: int = 0) -> bool:
    if not isinstance(node, dict) or depth > _STRICT_MAX_DEPTH:
        return False
    if any(key not in _STRICT_KEYWORDS for key in node):
        return False
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        return False
    kinds = node.get("type")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
    if is_object or "properties" in node:
        if "properties" not in node and node.get("additionalProperties") is not False:
            return False  # a free-form object: strict mode would only allow {}
        props = node.get("properties", {})
        if not isinstance(props, dict):
            return False
        if sorted(node.get("required") or []) != sorted(props):
            return False
        if node.get("additionalProperties", False) is not False:
            return False
        node["additionalProperties"] = False
        node.setdefault("properties", props)
        node.setdefault("required", list(props))
        if not all(_make_strict(sub, depth + 1) for sub in props.values()):
            return False
    if "items" in node and not _make_strict(node["items"], depth + 1):
        return False
    if "anyOf" in node and not (
        isinstance(node["anyOf"], list)
        and all(_make_strict(sub, depth + 1) for sub in node["anyOf"])
    ):
        return False
    defs = node.get("$defs", {})
    return isinstance(defs, dict) and all(_make_strict(sub, depth + 1) for sub in defs.values())


def strict_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` (OpenAI shape) with ``strict: true`` on each function whose parameters
    qualify (:func:`strict_schema`); the others are sent as they are."""
    out = []
    for tool in tools:
        function = tool.get("function")
        strict = (
            strict_schema(function.get("parameters") or {})
            if isinstance(function, Mapping)
            else None
        )
        if strict is None or not isinstance(function, Mapping):
            out.append(dict(tool))
            continue
        out.append({**tool, "function": {**function, "parameters": strict, "strict": True}})
    return out
