"""Impression synthesis (seed 004): after a run, the model updates what we know of the user.

Per run: one model call extracts insights as a JSON object, validated against
``INSIGHTS_SCHEMA``; every ``SYNTHESIS_EVERY``-th interaction a second call
consolidates the whole profile (``CONSOLIDATION_SCHEMA``). The result is
appended to ``profiles`` as one new version (source ``synthesis`` or
``consolidation``).

Model output is untrusted: a reply that is too large, not JSON, or not of the
schema is dropped with a logged warning, and the interaction still counts (so
"every third" means every third run, whatever the model wrote). ``after_run``
is the hook for a job: it runs after the run's rows are stored and catches
every exception, so memory can never fail or undo a run.

Whether the model is asked at all is the spec's ``memory.synthesis``: ``on``,
``off``, or ``auto`` (the default): ask unless the provider turns the request
down beforehand (``providers.base.refusal``: a replay script with no line marked
``"for": "memory"``, an in-process model too small to write JSON). A skipped step
is one notice, and the interaction still counts.

Replay scripts: the profile step's requests read only the script's lines marked
``"for": "memory"`` (the insights JSON, then on every third interaction of that
user the consolidation JSON), so they never take a line meant for the job.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator

from toolwire.domain import Completion, CompletionRequest, parse_topics
from toolwire.errors import (
    LLM_PROVIDER_ERROR,
    LLM_PROVIDER_TIMEOUT,
    LLM_PROVIDER_TRANSIENT,
    LLM_PROVIDER_UNREACHABLE,
    REPLAY_EXHAUSTED,
    RunNotFound,
    ToolwireError,
)
from toolwire.memory.profiles import load_profile, save_profile, undone_operations, user_context
from toolwire.memory.state import (
    MAX_CONSTRAINTS,
    MAX_EXPERTISE,
    MAX_GOALS,
    MAX_INTERESTS,
    MAX_PATTERNS,
    MAX_PREFERENCES,
    MAX_PROJECTS,
    UserProfile,
)
from toolwire.memory.tokens import TokenCounter, estimate_tokens, token_counter, truncate_to_tokens
from toolwire.providers.base import refusal

if TYPE_CHECKING:
    from toolwire.store import Store

__all__ = [
    "CONSOLIDATION_SCHEMA",
    "INSIGHTS_SCHEMA",
    "MAX_REPLY_BYTES",
    "SYNTHESIS_EVERY",
    "ImpressionUpdate",
    "Interaction",
    "after_run",
    "interaction_from_run",
    "learn",
    "memory_request",
    "parse_json_reply",
    "skip_reason",
    "update_impression",
]

SYNTHESIS_EVERY = 3  # seed 004: synthesis_threshold
MAX_REPLY_BYTES = 32_000  # larger replies are dropped unread (a profile is a few hundred bytes)
REPLY_MAX_TOKENS = 300
_SCHEMA_MAX_CHARS = 1000  # per string; the profile keeps the first MAX_ITEM_CHARS
# Runs that failed on the provider: asking the same provider again would fail (or wait) too.
_PROVIDER_FAULTS = frozenset(
    {
        LLM_PROVIDER_TIMEOUT,
        LLM_PROVIDER_UNREACHABLE,
        LLM_PROVIDER_TRANSIENT,
        LLM_PROVIDER_ERROR,
        REPLAY_EXHAUSTED,
    }
)

log = logging.getLogger(__name__)

_TEXT: dict[str, Any] = {"type": "string", "maxLength": _SCHEMA_MAX_CHARS}
_OPT_TEXT: dict[str, Any] = {"type": ["string", "null"], "maxLength": _SCHEMA_MAX_CHARS}
_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean", "null"]}


def _texts(limit: int) -> dict[str, Any]:
    return {"type": "array", "items": _TEXT, "maxItems": limit}


def _object(values: dict[str, Any], limit: int) -> dict[str, Any]:
    return {"type": "object", "maxProperties": limit, "additionalProperties": values}


# The seed's insight keys, plus `interests` (topics the user cares about) and `constraints`.
INSIGHTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "preferences": _object(_SCALAR, MAX_PREFERENCES),
        "goals": _texts(MAX_GOALS),
        "expertise": _texts(MAX_EXPERTISE),
        "interests": _texts(MAX_INTERESTS),
        "constraints": _texts(MAX_CONSTRAINTS),
        "communication_style": _OPT_TEXT,
        "project_context": _object(_TEXT, MAX_PROJECTS),
        "success_pattern": _OPT_TEXT,
        "failure_pattern": _OPT_TEXT,
    },
}

CONSOLIDATION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "preferences": _object(_SCALAR, MAX_PREFERENCES),
        "goals": _texts(MAX_GOALS),
        "expertise_areas": _texts(MAX_EXPERTISE),
        "communication_style": _OPT_TEXT,
        "projects": _object(_TEXT, MAX_PROJECTS),
        "interests": _texts(MAX_INTERESTS),
        "constraints": _texts(MAX_CONSTRAINTS),
        "success_patterns": _texts(MAX_PATTERNS),
        "failure_patterns": _texts(MAX_PATTERNS),
    },
}

SYSTEM_PROMPT = "You describe a user from their interactions. Reply with one JSON object only."

EXTRACT_PROMPT = """Extract user insights from this interaction.

User request: {query}
Agent result: {response}
Success: {success}
{extra}
Return one JSON object. Every key is optional; leave out what you do not know:
{{"preferences": {{"naming_style": "how they want note titles written"}},
 "goals": ["..."], "expertise": ["..."], "interests": ["topics they care about"],
 "communication_style": "concise|detailed|technical",
 "project_context": {{"project name": "description"}},
 "success_pattern": "what worked", "failure_pattern": "what did not work"}}"""

CONSOLIDATE_PROMPT = """Synthesize an evolved user profile.

CURRENT PROFILE:
{profile}

RECENT INTERACTION:
Request: {query}
Success: {success}

Consolidate understanding over time, prefer recent patterns, remove contradictions.
Return one JSON object with the updated fields (leave out unknown ones):
{{"preferences": {{}}, "goals": [], "expertise_areas": [], "communication_style": "",
 "projects": {{}}, "interests": [], "constraints": [], "success_patterns": [],
 "failure_patterns": []}}"""

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\s*$", re.S)


@dataclass(frozen=True, slots=True)
class Interaction:
    """What the synthesizer is told about one run."""

    query: str
    response: str
    success: bool
    run_id: str | None = None
    notes: tuple[str, ...] = ()  # e.g. operations the user undid before
    provider_fault: bool = False  # the run failed on the provider: do not call it again


@dataclass(frozen=True, slots=True)
class ImpressionUpdate:
    profile: UserProfile
    version: int  # 0 until stored
    source: str  # "synthesis" | "consolidation"
    warnings: tuple[str, ...]


# -- parsing the model's JSON --------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity would poison profile_json


def _validator(schema: Mapping[str, Any]) -> Any:
    return Draft202012Validator(schema)


def parse_json_reply(text: Any, schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The JSON object in a model reply, checked against ``schema``; never raises.

    Returns ``(object, "")`` or ``(None, reason)``. Tolerated: a code fence
    around the object and prose before or after it (small models add both).
    """
    if not isinstance(text, str):
        return None, f"reply is {type(text).__name__}, not text"
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_REPLY_BYTES:
        return None, f"reply too large ({size} bytes > {MAX_REPLY_BYTES})"
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    try:
        try:
            # The whole reply first: a JSON array or string is then judged by the schema
            # instead of being mined for an object inside it.
            value = decoder.decode(body)
        except json.JSONDecodeError:
            start = body.find("{")
            if start < 0:
                return None, "no JSON object in the reply"
            value, _ = decoder.raw_decode(body, start)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON: {type(exc).__name__}: {str(exc)[:100]}"
    try:
        errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.path))
    except RecursionError:
        return None, "JSON nested too deeply"
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "(root)"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return None, f"does not match the schema at {where}: {first.message[:200]}{more}"
    return value, ""


# -- the model calls -----------------------------------------------------------------------

Complete = Callable[[CompletionRequest], Completion]


def memory_request(prompt: str) -> CompletionRequest:
    """A request of the profile step (purpose "memory": replay answers it from its own lines)."""
    return CompletionRequest(
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ],
        temperature=0.0,
        max_tokens=REPLY_MAX_TOKENS,
        purpose="memory",
    )


def _ask(complete: Complete, prompt: str, schema: Mapping[str, Any]) -> tuple[dict | None, str]:
    request = memory_request(prompt)
    try:
        completion = complete(request)
    except ToolwireError as exc:
        return None, f"model call failed: {exc}"
    return parse_json_reply(completion.text, schema)


def _extract_prompt(interaction: Interaction, count_tokens: TokenCounter) -> str:
    extra = "\n".join(interaction.notes)
    return EXTRACT_PROMPT.format(
        query=truncate_to_tokens(interaction.query, 150, count_tokens),
        response=truncate_to_tokens(interaction.response, 300, count_tokens),
        success=str(interaction.success).lower(),
        extra=truncate_to_tokens(extra, 150, count_tokens) + "\n" if extra else "",
    )


def _consolidate_prompt(
    profile: UserProfile, interaction: Interaction, count_tokens: TokenCounter
) -> str:
    current = user_context(profile, max_tokens=400, count_tokens=count_tokens)
    return CONSOLIDATE_PROMPT.format(
        profile=current or "(empty)",
        query=truncate_to_tokens(interaction.query, 150, count_tokens),
        success=str(interaction.success).lower(),
    )


def learn(
    profile: UserProfile,
    complete: Complete | None,
    interaction: Interaction,
    *,
    count_tokens: TokenCounter = estimate_tokens,
    now: datetime | None = None,
    skipped: str | None = None,
) -> ImpressionUpdate:
    """A new profile learned from one interaction; ``profile`` itself is not changed.

    Counts the interaction, merges the model's insights and, every
    ``SYNTHESIS_EVERY``-th interaction, applies a consolidated profile.
    ``complete`` None means no model calls (the interaction still counts): a
    warning unless ``skipped`` says why (the caller's notice). Bad model output
    becomes a warning (logged and returned), never an exception.
    The returned ``version`` is 0: nothing is stored here.
    """
    profile = copy.deepcopy(profile)
    warnings: list[str] = []
    insights: dict[str, Any] = {}
    if complete is None:
        if skipped is None:
            warnings.append("no model call: the run failed on its provider")
    else:
        prompt = _extract_prompt(interaction, count_tokens)
        parsed, problem = _ask(complete, prompt, INSIGHTS_SCHEMA)
        if parsed is None:
            warnings.append(f"insights dropped: {problem}")
        else:
            insights = parsed
    profile.update_from_interaction(insights, now=now)
    source = "synthesis"
    if complete is not None and profile.interaction_count % SYNTHESIS_EVERY == 0:
        prompt = _consolidate_prompt(profile, interaction, count_tokens)
        parsed, problem = _ask(complete, prompt, CONSOLIDATION_SCHEMA)
        if parsed is None:
            warnings.append(f"consolidated profile dropped: {problem}")
        else:
            profile.apply_synthesis(parsed, now=now)
            source = "consolidation"
    for warning in warnings:
        log.warning("profile of %r: %s", profile.user_id, warning)
    return ImpressionUpdate(profile, 0, source, tuple(warnings))


def update_impression(
    store: Store,
    complete: Complete | None,
    user_id: str,
    interaction: Interaction,
    *,
    count_tokens: TokenCounter = estimate_tokens,
    now: datetime | None = None,
    skipped: str | None = None,
) -> ImpressionUpdate:
    """Load ``user_id``'s profile, ``learn`` from the interaction, append the new version.

    Store errors raise (``after_run`` catches them); model output never does.
    """
    learned = learn(
        load_profile(store, user_id),
        complete,
        interaction,
        count_tokens=count_tokens,
        now=now,
        skipped=skipped,
    )
    version = save_profile(store, learned.profile, source=learned.source, run_id=interaction.run_id)
    return replace(learned, version=version)


# -- the job hook --------------------------------------------------------------------------


def _what(kind: str, title: str | None, body: str | None) -> str:
    """What an operation changed, in a few words: a retag's topics, else the title.

    A retag's title is the note's own (or the prompt's placeholder): not news.
    """
    if kind == "retag_note":
        topics = ", ".join(parse_topics(body or ""))
        return f" as {topics[:120]!r}" if topics else ""
    return f" titled {title[:120]!r}" if title else ""


def interaction_from_run(store: Store, run_id: str) -> Interaction:
    """Describe a stored run for the synthesizer: the spec's goal, status and operations."""
    _, runs = store.query(
        "SELECT r.status, r.error_code, r.user_id, r.spec_name, s.canonical_json "
        "FROM runs r LEFT JOIN specs s ON s.spec_hash = r.spec_hash WHERE r.run_id = ?",
        [run_id],
    )
    if not runs:
        raise RunNotFound(f"no run {run_id!r} in the store")
    status, error_code, user_id, spec_name, canonical = runs[0]
    goal = ""
    try:
        spec = json.loads(canonical) if canonical else {}
        goal = str(spec.get("goal") or "") if isinstance(spec, dict) else ""
    except ValueError:
        pass
    _, ops = store.query(
        "SELECT kind, target, title, body_markdown, status, code FROM operations "
        "WHERE run_id = ? ORDER BY turn, seq LIMIT 12",
        [run_id],
    )
    lines = [f"run {status}" + (f" ({error_code})" if error_code else "")]
    for kind, target, title, body, op_status, code in ops:
        lines.append(
            f"{op_status} {kind} {target}{_what(kind, title, body)}"
            + (f" [{code}]" if code else "")
        )
    undone = undone_operations(store, user_id) if user_id else []
    notes = ("Operations the user undid before: " + "; ".join(undone),) if undone else ()
    return Interaction(
        query=goal or f"run the {spec_name} agent",
        response="\n".join(lines),
        success=status == "ok",
        run_id=run_id,
        notes=notes,
        provider_fault=error_code in _PROVIDER_FAULTS,
    )


def _complete_of(provider: Any) -> Complete | None:
    complete = getattr(provider, "complete", None)
    if callable(complete):
        return complete
    return provider if callable(provider) else None


def skip_reason(provider: Any, mode: str) -> str | None:
    """Why the profile step makes no model call under ``mode`` (None: it asks)."""
    if mode == "off":
        return "memory.synthesis is off in the spec"
    if mode == "on":
        return None
    return refusal(provider, memory_request(""))


def after_run(store: Store, provider: Any, user_id: str, run_id: str, mode: str = "auto") -> None:
    """Update ``user_id``'s profile from a finished, stored run; never raises.

    ``provider`` is a ``Provider`` (or a bare ``complete`` callable); ``mode`` the
    spec's ``memory.synthesis``. A step skipped in ``auto`` mode is one warning that
    says why and how to change it; ``off`` is silent. Any failure (store, provider,
    a bug) is logged as a warning: the run's result stands.
    """
    try:
        interaction = interaction_from_run(store, run_id)
        complete = None if interaction.provider_fault else _complete_of(provider)
        skipped = skip_reason(provider, mode) if complete is not None else None
        if skipped is not None:
            complete = None
            level = logging.DEBUG if mode == "off" else logging.WARNING
            log.log(level, "profile synthesis skipped: %s", skipped)
        update_impression(
            store,
            complete,
            user_id or "default",
            interaction,
            count_tokens=token_counter(provider),
            skipped=skipped,
        )
    except Exception as exc:  # memory is an aid: it never fails the run
        log.warning("profile of %r not updated after run %s: %s", user_id, run_id, exc)
