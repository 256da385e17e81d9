"""Tools: declared in a spec, checked against their JSON Schema, run with a timeout.

``registry`` resolves declarations (arguments are converted and checked by
``toolwire.arguments``, below the parsers),
``executor`` runs calls (failures become results, never crashes) and
``builtins`` holds the workspace-confined file tools.
"""

from __future__ import annotations

from toolwire.tools.builtins import BUILTIN_SCHEMAS, ToolFailed
from toolwire.tools.executor import (
    OVER_BUDGET_TEXT,
    OutputBudget,
    ToolOutcome,
    content_text,
    run_call,
    run_calls,
)
from toolwire.tools.registry import Tool, ToolRegistry, build_registry

__all__ = [
    "BUILTIN_SCHEMAS",
    "OVER_BUDGET_TEXT",
    "OutputBudget",
    "Tool",
    "ToolFailed",
    "ToolOutcome",
    "ToolRegistry",
    "build_registry",
    "content_text",
    "run_call",
    "run_calls",
]
