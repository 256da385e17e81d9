"""The user profile of seed 004's situated memory: what toolwire learns about a user.

Plain mutable dataclass with small bounded update methods; nothing here builds
a prompt. Every collection the seed bounds keeps its most recent entries only
(goals 10, expertise 15, projects 10, success/failure patterns 5 each). The
seed leaves a few profile collections unbounded; toolwire bounds them too
(preferences 20, interests 15, constraints 10), because a profile is fed by
model output and kept forever, and truncates every stored string to
``MAX_ITEM_CHARS``.

Model output reaches this module through ``UserProfile.update_from_interaction``
and ``apply_synthesis``: they ignore values of the wrong type instead of
raising (untrusted input never crashes a run).

Seed 004's execution state and reasoning context are not here: the tool agent
keeps its own loop state (``toolwire.agent.loop.AgentState``), and builders
that only tests called were removed (issue 17).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "MAX_CONSTRAINTS",
    "MAX_EXPERTISE",
    "MAX_GOALS",
    "MAX_INTERESTS",
    "MAX_PATTERNS",
    "MAX_PREFERENCES",
    "MAX_PROJECTS",
    "UserProfile",
]

# Bounds from seed 004.
MAX_GOALS = 10
MAX_EXPERTISE = 15
MAX_PROJECTS = 10
MAX_PATTERNS = 5  # success and failure patterns, each
# toolwire's own bounds for collections the seed leaves open.
MAX_PREFERENCES = 20
MAX_INTERESTS = 15
MAX_CONSTRAINTS = 10
MAX_ITEM_CHARS = 300  # one stored string (goal, preference value, ...)


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
