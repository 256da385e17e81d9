"""Agent state and situated memory (seed 004).

``state``: execution state, reasoning context and user profile, every collection
bounded; ``prompts``: pure state -> prompt/messages builders; ``tokens``: token
counting and boundary truncation; ``profiles``: versioned profiles in the store
and the USER CONTEXT block; ``synthesis``: the impression synthesizer and the
``after_run`` hook. Nothing here imports DuckDB, jsonschema or a model at
import time.
"""

from __future__ import annotations

from toolwire.memory.profiles import (
    latest_profile,
    load_profile,
    profile_block,
    profile_history,
    profile_prompt_context,
    record_undo,
    reset_profile,
    save_profile,
    user_context,
)
from toolwire.memory.prompts import build_messages, build_prompt, compress_context
from toolwire.memory.state import (
    AgentState,
    ExecutionState,
    ReasoningContext,
    UserProfile,
    apply_reasoning_update,
    should_continue,
    stop_condition,
)
from toolwire.memory.synthesis import after_run, update_impression
from toolwire.memory.tokens import token_counter, truncate_to_tokens

__all__ = [
    "AgentState",
    "ExecutionState",
    "ReasoningContext",
    "UserProfile",
    "after_run",
    "apply_reasoning_update",
    "build_messages",
    "build_prompt",
    "compress_context",
    "latest_profile",
    "load_profile",
    "profile_block",
    "profile_history",
    "profile_prompt_context",
    "record_undo",
    "reset_profile",
    "save_profile",
    "should_continue",
    "stop_condition",
    "token_counter",
    "truncate_to_tokens",
    "update_impression",
    "user_context",
]
