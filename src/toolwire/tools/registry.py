"""The tools of one run: spec declarations resolved to callables, checked up front.

``builtin:NAME`` binds a built-in to the run's workspace folder;
``python:module:function`` imports ``function`` and calls it with the
arguments as keywords. Specs are untrusted (``python:os:system`` would run
whatever the model asks), so a ``python:`` tool needs the user's explicit
opt-in, ``TOOLWIRE_ALLOW_PYTHON_TOOLS=1`` in the environment (never a spec
key), checked before its module is even imported.

Everything that can be wrong with a declaration (an unknown built-in, a module
that does not import, arguments a built-in does not understand) fails here,
before the first model call, as a UsageError naming the tool.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError
from toolwire.spec.settings import load_settings
from toolwire.tools.builtins import BUILTIN_SCHEMAS, BUILTINS

__all__ = [
    "PYTHON_TOOLS_SETTING",
    "Tool",
    "ToolRegistry",
    "build_registry",
    "python_tools_allowed",
    "resolve_implementation",
]

# What ToolSpec.args defaults to: "no arguments declared".
_EMPTY_SCHEMA = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Tool:
    """One callable tool; ``args`` is its JSON Schema (the name protocol renderers read)."""

    name: str
    description: str
    args: dict[str, Any]
    implementation: str
    timeout_s: float
    fn: Callable[..., Any]


class ToolRegistry(Mapping[str, Tool]):
    """Tools by name, in declaration order (the order prompts list them in)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def schemas(self) -> dict[str, dict[str, Any]]:
        """name -> argument schema, the shape execute/xct validators take."""
        return {name: tool.args for name, tool in self._tools.items()}


PYTHON_TOOLS_SETTING = "TOOLWIRE_ALLOW_PYTHON_TOOLS"


def python_tools_allowed() -> bool:
    """Whether the user opted in to ``python:`` tools (settings, from the environment)."""
    return bool(load_settings().allow_python_tools)


def resolve_implementation(
    implementation: str, workspace: Path, *, allow_python: bool = False
) -> Callable[..., Any]:
    """The callable behind ``builtin:NAME`` or ``python:module:function``."""
    kind, _, rest = implementation.partition(":")
    if kind == "builtin":
        builtin = BUILTINS.get(rest)
        if builtin is None:
            raise UsageError(f"unknown built-in tool {rest!r}; known: {', '.join(BUILTINS)}")
        return functools.partial(builtin, workspace)
    if kind == "python":
        if not allow_python:
            raise UsageError(
                f"tool {implementation!r} runs Python code with the model's arguments, and a "
                f"spec is untrusted: set {PYTHON_TOOLS_SETTING}=1 to allow python: tools"
            )
        module_name, _, attr = rest.rpartition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # any failure to import is the spec's problem
            raise UsageError(
                f"cannot import {module_name!r} for {implementation!r}: {exc}"
            ) from None
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise UsageError(f"{implementation!r}: {module_name} has no callable {attr!r}")
        return fn
    raise UsageError(f"unknown tool implementation {implementation!r}")


def _schema_for(spec: Any) -> dict[str, Any]:
    """The spec's schema, or the built-in's default when the spec declares none."""
    kind, _, rest = spec.implementation.partition(":")
    declared = dict(spec.args)
    if kind != "builtin" or rest not in BUILTIN_SCHEMAS:
        return declared
    if declared == _EMPTY_SCHEMA:
        return BUILTIN_SCHEMAS[rest]
    understood = set(BUILTIN_SCHEMAS[rest]["properties"])
    unknown = sorted(set(declared.get("properties") or {}) - understood)
    if unknown:
        raise UsageError(
            f"tool {spec.name!r}: builtin:{rest} takes only {sorted(understood)}, "
            f"the spec declares {unknown}"
        )
    # A built-in is a Python function of its declared names: JSON Schema would let an
    # undeclared argument through to a TypeError, so its schema closes the object.
    declared.setdefault("additionalProperties", False)
    return declared


def build_registry(
    specs: Sequence[Any], *, workspace: str | Path, allow_python: bool | None = None
) -> ToolRegistry:
    """A registry from a spec's ``tools`` (``ToolSpec``s); built-ins act inside ``workspace``.

    ``allow_python`` defaults to the user's setting (``TOOLWIRE_ALLOW_PYTHON_TOOLS``).
    """
    root = Path(workspace).resolve()
    if allow_python is None:
        allow_python = (
            any(s.implementation.startswith("python:") for s in specs) and python_tools_allowed()
        )
    tools = [
        Tool(
            name=spec.name,
            description=spec.description,
            args=_schema_for(spec),
            implementation=spec.implementation,
            timeout_s=float(spec.timeout_s),
            fn=resolve_implementation(spec.implementation, root, allow_python=allow_python),
        )
        for spec in specs
    ]
    return ToolRegistry(tools)
