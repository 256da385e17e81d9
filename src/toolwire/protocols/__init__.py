"""Wire formats: one package per transport, each with its wire rules, its one parser
(a whole reply, one pass, linear on hostile input) and its GBNF grammar.

- ``attrless``: seed 002, the librarian's attribute-free XML envelopes.
- ``slots``: seed 001, nonce/slot tags (modes ``xml`` and ``xml-final``).
- ``execute``: seed 000, ``<think>`` / ``<execute>`` / ``<results>``.
- ``xct``: seed 003, one JSON decision per turn.
- ``native``: provider tool calls, and calls a model leaked as text.

Shared below them: ``text`` (bounds, positions, problems, strict JSON, escapes) and
``final_report`` (the final report's tag, every transport). Outside: the payload's
reading is the agent's (``agent.final_report``), why a model stopped is
``toolwire.stop_reasons``, argument checks are ``tools.args``, and
``toolwire.gbnf`` holds the grammar helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Schemas", "ToolLike"]

Schemas = Mapping[str, Mapping[str, Any] | None]  # tool name -> argument schema


class ToolLike(Protocol):
    """What rendering needs of a tool (``toolwire.spec.model.ToolSpec`` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...
