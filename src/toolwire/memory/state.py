"""Agent state split three ways (seed 004): execution, reasoning context, user profile.

Plain mutable dataclasses with small bounded update methods; nothing here
builds a prompt (seed 004: "no methods in state classes for prompt building";
see ``toolwire.memory.prompts``). Every collection the seed bounds keeps its
most recent entries only (insights 10, facts 20, thoughts 5, goals 10,
expertise 15, projects 10, success/failure patterns 5 each). The seed leaves a
few profile collections unbounded; toolwire bounds them too (preferences 20,
interests 15, constraints 10), because a profile is fed by model output and
kept forever, and truncates every stored string to ``MAX_ITEM_CHARS``.

Model output reaches this module through ``apply_reasoning_update`` and
``UserProfile.update_from_interaction``/``apply_synthesis``: they ignore values
of the wrong type instead of raising (untrusted input never crashes the loop).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from toolwire.errors import UsageError

__all__ = [
    "MAX_EXPERTISE",
    "MAX_FACTS",
    "MAX_GOALS",
    "MAX_INSIGHTS",
    "MAX_PATTERNS",
    "MAX_PROJECTS",
    "MAX_THOUGHTS",
    "MODES",
    "AgentState",
    "ExecutionState",
    "ReasoningContext",
    "UserProfile",
    "apply_reasoning_update",
    "should_continue",
    "stop_condition",
]

# Bounds from seed 004.
MAX_INSIGHTS = 10
MAX_FACTS = 20
MAX_THOUGHTS = 5
MAX_GOALS = 10
MAX_EXPERTISE = 15
MAX_PROJECTS = 10
MAX_PATTERNS = 5  # success and failure patterns, each
# toolwire's own bounds for collections the seed leaves open.
MAX_PREFERENCES = 20
MAX_INTERESTS = 15
MAX_CONSTRAINTS = 10
MAX_ERRORS_KEPT = 10
MAX_NOTIFICATIONS = 20
MAX_ITEM_CHARS = 300  # one stored string (insight, goal, preference value, ...)

MODES: tuple[str, ...] = ("fast", "deep", "adapt")

# Why a loop stops (``stop_condition``); a stop_reason set by the engine wins.
STOP_RESPONSE = "response"
STOP_MAX_ITERATIONS = "max_iterations"
STOP_BUDGET = "token_budget_exhausted"
STOP_ERRORS = "too_many_errors"
STOP_NO_CALLS = "no_pending_calls"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # naive UTC, the store's convention


def _clean(value: Any) -> str:
    """A stored string: stripped and capped; non-strings become ''."""
    if not isinstance(value, str):
        return ""
    return value.strip()[:MAX_ITEM_CHARS]


def _scalar(value: Any) -> Any:
    """A preference/fact value kept as JSON: strings capped, containers dumped to a capped str."""
    if isinstance(value, str):
        return _clean(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return json.dumps(value, sort_keys=True, default=str)[:MAX_ITEM_CHARS]


def _append_bounded(items: list[str], new: Iterable[Any], limit: int) -> list[str]:
    """Seed semantics: append unseen items, keep the last ``limit``."""
    out = list(items)
    for item in new:
        text = _clean(item)
        if text and text not in out:
            out.append(text)
    return out[-limit:]


def _merge_bounded(
    current: Mapping[str, Any], new: Mapping[Any, Any], limit: int
) -> dict[str, Any]:
    """Update a dict; an updated key moves to the end, so 'last N' means most recently set."""
    out = dict(current)
    for key, value in new.items():
        name = _clean(key)
        if not name:
            continue
        out.pop(name, None)
        out[name] = _scalar(value)
    return dict(list(out.items())[-limit:])


def _texts(values: Mapping[str, Any]) -> dict[str, str]:
    """Project descriptions are text; empty ones are dropped."""
    return {k: str(v) for k, v in values.items() if v not in (None, "")}


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _as_dict(value: Any) -> dict[Any, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


# -- execution -----------------------------------------------------------------------------


@dataclass
class ExecutionState:
    """Loop tracking (seed 004) plus the budget and error controls the seed asks for."""

    query: str
    user_id: str = "default"
    iteration: int = 0
    max_iterations: int = 10
    mode: str = "adapt"  # "fast" | "deep" | "adapt"
    stop_reason: str | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    response: str | None = None
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    completed_calls: list[dict[str, Any]] = field(default_factory=list)
    debug: bool = False
    notifications: list[dict[str, Any]] = field(default_factory=list)
    # Loop controls beyond pending calls (seed 004, "Loop Control" requirement).
    token_budget: int | None = None  # total tokens the loop may spend; None = no limit
    tokens_used: int = 0
    max_consecutive_errors: int = 3
    consecutive_errors: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.max_iterations < 1:
            raise UsageError("max_iterations must be at least 1")
        if self.max_consecutive_errors < 1:
            raise UsageError("max_consecutive_errors must be at least 1")

    def add_message(self, role: str, content: str) -> None:
        """Append to the conversation (with a timestamp the prompt builders drop)."""
        self.messages.append({"role": role, "content": content, "timestamp": _now().isoformat()})

    def set_tool_calls(self, calls: Sequence[Mapping[str, Any]]) -> None:
        self.pending_calls = [dict(c) for c in calls if isinstance(c, Mapping)]

    def complete_tool_calls(self, results: Sequence[Mapping[str, Any]]) -> None:
        self.completed_calls.extend(dict(r) for r in results)
        self.pending_calls.clear()

    def advance_iteration(self) -> None:
        self.iteration += 1

    def notify(self, event: dict[str, Any]) -> None:
        self.notifications = [*self.notifications, dict(event)][-MAX_NOTIFICATIONS:]

    def record_usage(self, tokens: int) -> None:
        """Count tokens spent (prompt + completion) against ``token_budget``."""
        self.tokens_used += max(0, int(tokens))

    def record_error(self, message: str) -> None:
        """A failed step (unparseable reply, failed tool batch); too many in a row stop the loop."""
        self.consecutive_errors += 1
        self.errors = [*self.errors, str(message)[:MAX_ITEM_CHARS]][-MAX_ERRORS_KEPT:]

    def record_success(self) -> None:
        self.consecutive_errors = 0

    def switch_mode(self, mode: Any) -> bool:
        """The model may switch modes; unknown values are ignored. True if the mode changed."""
        if mode in MODES and mode != self.mode:
            self.mode = mode
            return True
        return False


def stop_condition(state: ExecutionState) -> str | None:
    """Why the loop must stop now, or None to continue.

    Seed 004's rule (iterations left, no response, no stop reason, calls
    pending) plus a token budget and a consecutive-error limit.
    """
    if state.stop_reason:
        return state.stop_reason
    if state.response:
        return STOP_RESPONSE
    if state.consecutive_errors >= state.max_consecutive_errors:
        return STOP_ERRORS
    if state.token_budget is not None and state.tokens_used >= state.token_budget:
        return STOP_BUDGET
    if state.iteration >= state.max_iterations:
        return STOP_MAX_ITERATIONS
    if not state.pending_calls:
        return STOP_NO_CALLS
    return None


def should_continue(state: ExecutionState) -> bool:
    """True while the loop should run another iteration (see ``stop_condition``)."""
    return stop_condition(state) is None


# -- reasoning -----------------------------------------------------------------------------


@dataclass
class ReasoningContext:
    """Structured reasoning memory (seed 004): facts are a dict, not a string."""

    goal: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    strategy: str = ""
    insights: list[str] = field(default_factory=list)
    thoughts: list[dict[str, Any]] = field(default_factory=list)

    def add_insight(self, insight: Any) -> None:
        self.insights = _append_bounded(self.insights, [insight], MAX_INSIGHTS)

    def update_facts(self, key: Any, value: Any) -> None:
        self.facts = _merge_bounded(self.facts, {key: value}, MAX_FACTS)

    def record_thinking(self, thinking: str, tool_calls: Sequence[Mapping[str, Any]]) -> None:
        thought = {
            "thinking": str(thinking),
            "tool_calls": [dict(c) for c in tool_calls if isinstance(c, Mapping)],
            "timestamp": _now().isoformat(),
        }
        self.thoughts = [*self.thoughts, thought][-MAX_THOUGHTS:]


# -- user profile --------------------------------------------------------------------------


@dataclass
class UserProfile:
    """What toolwire has learned about one user across runs (seed 004's situated memory)."""

    user_id: str
    preferences: dict[str, Any] = field(default_factory=dict)
    goals: list[str] = field(default_factory=list)
    expertise_areas: list[str] = field(default_factory=list)
    communication_style: str = ""
    projects: dict[str, str] = field(default_factory=dict)
    interests: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    success_patterns: list[str] = field(default_factory=list)
    failure_patterns: list[str] = field(default_factory=list)
    created_at: datetime = field(default_factory=_now)
    last_updated: datetime = field(default_factory=_now)
    interaction_count: int = 0
    synthesis_version: int = 1

    def update_from_interaction(
        self, insights: Mapping[str, Any], *, now: datetime | None = None
    ) -> None:
        """Count one interaction and merge its insights (seed 004 keys), bounded."""
        self.interaction_count += 1
        self.last_updated = now or _now()
        self.preferences = _merge_bounded(
            self.preferences, _as_dict(insights.get("preferences")), MAX_PREFERENCES
        )
        self.goals = _append_bounded(self.goals, _as_list(insights.get("goals")), MAX_GOALS)
        self.expertise_areas = _append_bounded(
            self.expertise_areas, _as_list(insights.get("expertise")), MAX_EXPERTISE
        )
        self.interests = _append_bounded(
            self.interests, _as_list(insights.get("interests")), MAX_INTERESTS
        )
        self.constraints = _append_bounded(
            self.constraints, _as_list(insights.get("constraints")), MAX_CONSTRAINTS
        )
        style = _clean(insights.get("communication_style"))
        if style:
            self.communication_style = style
        projects = _merge_bounded(
            self.projects, _as_dict(insights.get("project_context")), MAX_PROJECTS
        )
        self.projects = _texts(projects)
        self.success_patterns = _append_bounded(
            self.success_patterns, [insights.get("success_pattern")], MAX_PATTERNS
        )
        self.failure_patterns = _append_bounded(
            self.failure_patterns, [insights.get("failure_pattern")], MAX_PATTERNS
        )

    def apply_synthesis(self, data: Mapping[str, Any], *, now: datetime | None = None) -> None:
        """Replace fields with a consolidated profile's (non-empty ones only), bounded."""
        lists = {
            "goals": MAX_GOALS,
            "expertise_areas": MAX_EXPERTISE,
            "interests": MAX_INTERESTS,
            "constraints": MAX_CONSTRAINTS,
            "success_patterns": MAX_PATTERNS,
            "failure_patterns": MAX_PATTERNS,
        }
        for name, limit in lists.items():
            values = _append_bounded([], _as_list(data.get(name)), limit)
            if values:
                setattr(self, name, values)
        preferences = _merge_bounded({}, _as_dict(data.get("preferences")), MAX_PREFERENCES)
        if preferences:
            self.preferences = preferences
        projects = _merge_bounded({}, _as_dict(data.get("projects")), MAX_PROJECTS)
        if projects:
            self.projects = _texts(projects)
        style = _clean(data.get("communication_style"))
        if style:
            self.communication_style = style
        self.synthesis_version += 1
        self.last_updated = now or _now()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (timestamps as ISO strings), as stored in ``profiles.profile_json``."""
        return {
            "user_id": self.user_id,
            "preferences": dict(self.preferences),
            "goals": list(self.goals),
            "expertise_areas": list(self.expertise_areas),
            "communication_style": self.communication_style,
            "projects": dict(self.projects),
            "interests": list(self.interests),
            "constraints": list(self.constraints),
            "success_patterns": list(self.success_patterns),
            "failure_patterns": list(self.failure_patterns),
            "created_at": self.created_at.isoformat(),
            "last_updated": self.last_updated.isoformat(),
            "interaction_count": self.interaction_count,
            "synthesis_version": self.synthesis_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, user_id: str | None = None) -> UserProfile:
        """Rebuild a profile; wrong-typed fields are dropped and every bound re-applied."""
        profile = cls(user_id=user_id or _clean(data.get("user_id")) or "default")
        for name, limit in (
            ("goals", MAX_GOALS),
            ("expertise_areas", MAX_EXPERTISE),
            ("interests", MAX_INTERESTS),
            ("constraints", MAX_CONSTRAINTS),
            ("success_patterns", MAX_PATTERNS),
            ("failure_patterns", MAX_PATTERNS),
        ):
            setattr(profile, name, _append_bounded([], _as_list(data.get(name)), limit))
        profile.preferences = _merge_bounded({}, _as_dict(data.get("preferences")), MAX_PREFERENCES)
        projects = _merge_bounded({}, _as_dict(data.get("projects")), MAX_PROJECTS)
        profile.projects = _texts(projects)
        profile.communication_style = _clean(data.get("communication_style"))
        for name in ("created_at", "last_updated"):
            try:
                setattr(profile, name, datetime.fromisoformat(str(data[name])))
            except (KeyError, ValueError):
                pass  # keep the fresh default
        for name in ("interaction_count", "synthesis_version"):
            value = data.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(profile, name, value)
        return profile


# -- the whole state -----------------------------------------------------------------------


@dataclass
class AgentState:
    """Execution + reasoning + situated memory; built by ``start``."""

    execution: ExecutionState
    reasoning: ReasoningContext
    user_profile: UserProfile | None = None

    @classmethod
    def start(
        cls,
        query: str,
        *,
        user_id: str = "default",
        user_profile: UserProfile | None = None,
        max_iterations: int = 10,
        mode: str = "adapt",
        token_budget: int | None = None,
    ) -> AgentState:
        """A fresh state for ``query``: the goal is the query, the first message the user's."""
        execution = ExecutionState(
            query=query,
            user_id=user_id,
            max_iterations=max_iterations,
            mode=mode,
            token_budget=token_budget,
        )
        execution.add_message("user", query)
        return cls(execution, ReasoningContext(goal=query), user_profile)


def apply_reasoning_update(state: AgentState, data: Any) -> list[str]:
    """Apply one parsed model reply (seed 004's JSON shape) to ``state``; never raises.

    Returns warnings for ignored parts (wrong types, unknown modes), so the
    engine can feed them back to the model instead of dropping them silently.
    """
    if not isinstance(data, Mapping):
        return [f"reply must be a JSON object, got {type(data).__name__}"]
    warnings: list[str] = []
    thinking = data.get("thinking", "")
    raw_calls = data.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        warnings.append("tool_calls must be a list; ignored")
        raw_calls = []
    calls = [dict(c) for c in raw_calls if isinstance(c, Mapping)]
    if len(calls) != len(raw_calls):
        warnings.append("tool_calls entries must be objects; the others were ignored")
    if not isinstance(thinking, str):
        warnings.append("thinking must be a string; ignored")
        thinking = ""
    if thinking:
        state.reasoning.record_thinking(thinking, calls)
    if calls:
        state.execution.set_tool_calls(calls)
    updates = data.get("context_updates") or {}
    if not isinstance(updates, Mapping):
        warnings.append("context_updates must be an object; ignored")
        updates = {}
    for key in ("goal", "strategy"):
        if key in updates:
            text = _clean(updates[key])
            if text:
                setattr(state.reasoning, key, text)
            else:
                warnings.append(f"context_updates.{key} must be a non-empty string; ignored")
    if "insights" in updates:
        if isinstance(updates["insights"], list):
            for insight in updates["insights"]:
                state.reasoning.add_insight(insight)
        else:
            warnings.append("context_updates.insights must be a list; ignored")
    facts = updates.get("facts")
    if isinstance(facts, Mapping):
        for key, value in facts.items():
            state.reasoning.update_facts(key, value)
    response = data.get("response")
    if isinstance(response, str) and response.strip():
        state.execution.response = response
    mode = data.get("switch_mode")
    if mode and not state.execution.switch_mode(mode) and mode not in MODES:
        warnings.append(f"switch_mode must be one of {', '.join(MODES)}; got {mode!r}")
    return warnings
