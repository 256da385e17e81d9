"""Situated memory (seed 004): what toolwire learns about a user, for every job.

``state``: the user profile, every collection bounded; ``tokens``: token
counting and boundary truncation; ``profiles``: versioned profiles in the store
and the USER CONTEXT block; ``synthesis``: the impression synthesizer and the
``after_run`` hook, which ``toolwire.lifecycle`` calls after every run.

The package re-exports the profile side only: ``synthesis`` (jsonschema, the
librarian's topic parser and with it the markdown parser) is imported from its
own module by what runs it, so reading a profile (`toolwire profile show`) does
not load it.
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
from toolwire.memory.state import UserProfile
from toolwire.memory.tokens import token_counter, truncate_to_tokens

__all__ = [
    "UserProfile",
    "latest_profile",
    "load_profile",
    "profile_block",
    "profile_history",
    "profile_prompt_context",
    "record_undo",
    "reset_profile",
    "save_profile",
    "token_counter",
    "truncate_to_tokens",
    "user_context",
]
