"""Tools: declared in a spec, checked against their JSON Schema, run with a timeout.

``registry`` resolves declarations, ``args`` converts and checks arguments,
``executor`` runs calls (failures become results, never crashes) and
``builtins`` holds the workspace-confined file tools.
"""

from __future__ import annotations

from toolwire.tools.args import ArgProblem, check_args, coerce_args, coerce_value
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
    "ArgProblem",
    "OutputBudget",
    "Tool",
    "ToolFailed",
    "ToolOutcome",
    "ToolRegistry",
    "build_registry",
    "check_args",
    "coerce_args",
    "coerce_value",
    "content_text",
    "run_call",
    "run_calls",
]
