"""Wire formats: one package per transport, each with its wire rules, its one scanner
(whole texts and streams through the same code) and its GBNF grammar.

- ``attrless``: seed 002, the librarian's attribute-free XML envelopes.
- ``slots``: seed 001, nonce/slot tags (modes ``xml`` and ``xml-final``).
- ``execute``: seed 000, ``<think>`` / ``<execute>`` / ``<results>``.
- ``xct``: seed 003, one JSON decision per turn.
- ``native``: provider tool calls, and calls a model leaked as text.

Shared below them: ``text`` (bounds, positions, strict JSON, escapes),
``final_report`` (seed 001's three layers and the JSON repairs, every
transport), ``stop_reasons``; ``toolwire.gbnf`` holds the grammar helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Schemas", "ToolLike", "arg_problems"]

Schemas = Mapping[str, Mapping[str, Any] | None]  # tool name -> argument schema


class ToolLike(Protocol):
    """What rendering needs of a tool (``toolwire.spec.ToolSpec`` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...


def arg_problems(
    args: dict[str, Any], schema: Mapping[str, Any], who: str
) -> list[tuple[str, str]]:
    """Detail codes and model-facing lines from the shared argument checker
    (``toolwire.tools.args``), for the transports that check calls before any runs."""
    from toolwire.tools.args import check_args  # jsonschema: only for those transports

    lines = []
    for p in check_args(args, schema):
        if p.code == "MISSING_ARG":
            line = f"{who}: the required argument {p.arg!r} is missing: add it."
        else:
            arg = f" argument {p.arg!r}" if p.arg is not None else ""
            line = f"{who}{arg}: {p.message}."
        lines.append((p.detail, line))
    return lines
