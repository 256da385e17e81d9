"""The ``native`` transport (seed 001): tools travel as provider tool definitions.

``calls``: tool definitions out, a completion's tool calls sorted in (calls to
run, the final report, calls that cannot run). ``leaked``: tool calls a model
wrote as text instead (Hermes, OpenAI legacy, Anthropic XML shapes). No grammar:
a text grammar would forbid the provider's tool calls.
"""

from toolwire.protocols.native.calls import (
    FINAL_REPORT_STATUSES,
    FINAL_REPORT_TOOL,
    INVALID_JSON_ARGS,
    NativeFinal,
    NativeInvalid,
    NativeParse,
    assistant_message,
    final_report_definition,
    parse_native,
    tool_definition,
    tool_definitions,
    tool_message,
)
from toolwire.protocols.native.leaked import (
    LEAKED_CALL_INVALID,
    LeakedCall,
    LeakedScan,
    find_leaked_calls,
)

__all__ = [
    "FINAL_REPORT_STATUSES",
    "FINAL_REPORT_TOOL",
    "INVALID_JSON_ARGS",
    "LEAKED_CALL_INVALID",
    "LeakedCall",
    "LeakedScan",
    "NativeFinal",
    "NativeInvalid",
    "NativeParse",
    "assistant_message",
    "final_report_definition",
    "find_leaked_calls",
    "parse_native",
    "tool_definition",
    "tool_definitions",
    "tool_message",
]
