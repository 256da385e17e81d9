"""The user profile of seed 004: bounded, typed, and tolerant of hostile model output."""

from __future__ import annotations

import json

import pytest

from toolwire.memory import state as st
from toolwire.memory.state import UserProfile

pytestmark = pytest.mark.unit


def test_bounds_are_the_seeds() -> None:
    assert (st.MAX_GOALS, st.MAX_EXPERTISE, st.MAX_PROJECTS, st.MAX_PATTERNS) == (10, 15, 10, 5)


@pytest.mark.parametrize(
    ("key", "field", "limit"),
    [
        ("goals", "goals", 10),
        ("expertise", "expertise_areas", 15),
        ("interests", "interests", 15),
        ("constraints", "constraints", 10),
    ],
)
def test_profile_lists_keep_their_last_n(key: str, field: str, limit: int) -> None:
    profile = UserProfile("ann")
    for i in range(limit + 7):
        profile.update_from_interaction({key: [f"{key} {i}", f"{key} {i}"]})
    assert getattr(profile, field) == [f"{key} {i}" for i in range(7, limit + 7)]
    assert profile.interaction_count == limit + 7


@pytest.mark.parametrize(
    ("key", "field"),
    [("success_pattern", "success_patterns"), ("failure_pattern", "failure_patterns")],
)
def test_patterns_keep_the_last_five(key: str, field: str) -> None:
    profile = UserProfile("ann")
    for i in range(9):
        profile.update_from_interaction({key: f"pattern {i}"})
    profile.update_from_interaction({key: "pattern 8"})  # already there: not appended twice
    assert getattr(profile, field) == [f"pattern {i}" for i in range(4, 9)]


def test_projects_keep_ten_and_preferences_twenty() -> None:
    profile = UserProfile("ann")
    for i in range(14):
        profile.update_from_interaction({"project_context": {f"p{i}": f"project {i}"}})
    for i in range(26):
        profile.update_from_interaction({"preferences": {f"pref{i}": i}})
    assert list(profile.projects) == [f"p{i}" for i in range(4, 14)]
    assert list(profile.preferences) == [f"pref{i}" for i in range(6, 26)]


def test_stored_strings_are_capped() -> None:
    profile = UserProfile("ann")
    profile.update_from_interaction({"goals": ["g" * 5000], "communication_style": "c" * 900})
    assert len(profile.goals[0]) == st.MAX_ITEM_CHARS
    assert len(profile.communication_style) == st.MAX_ITEM_CHARS


# -- profile updates -------------------------------------------------------------------------


def test_wrong_typed_insights_are_ignored_but_the_interaction_counts() -> None:
    profile = UserProfile("ann")
    profile.update_from_interaction(
        {
            "goals": "not a list",
            "expertise": [1, None, "sql"],
            "preferences": ["x"],
            "project_context": "x",
            "communication_style": 7,
            "success_pattern": ["x"],
        }
    )
    assert profile.goals == [] and profile.expertise_areas == ["sql"]
    assert profile.preferences == {} and profile.projects == {}
    assert profile.communication_style == "" and profile.success_patterns == []
    assert profile.interaction_count == 1


def test_apply_synthesis_replaces_non_empty_fields_and_bumps_the_version() -> None:
    profile = UserProfile("ann", goals=["old"], interests=["cooking"], communication_style="terse")
    profile.apply_synthesis(
        {"goals": ["new"], "interests": [], "preferences": {"naming_style": "lower"}, "x": 1}
    )
    assert profile.goals == ["new"]
    assert profile.interests == ["cooking"]  # empty in the synthesis: kept
    assert profile.preferences == {"naming_style": "lower"}
    assert profile.communication_style == "terse"
    assert profile.synthesis_version == 2


def test_profile_round_trips_through_json_and_rebounds_hostile_data() -> None:
    profile = UserProfile("ann")
    profile.update_from_interaction(
        {"goals": ["g"], "preferences": {"naming_style": "Sentence case"}, "interests": ["x"]}
    )
    again = UserProfile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again == profile

    hostile = {
        "user_id": "ann",
        "goals": [f"g{i}" for i in range(100)],
        "failure_patterns": "nope",
        "preferences": {f"k{i}": i for i in range(50)},
        "created_at": "not a date",
        "interaction_count": -4,
    }
    rebuilt = UserProfile.from_dict(hostile)
    assert rebuilt.goals == [f"g{i}" for i in range(90, 100)]
    assert rebuilt.failure_patterns == [] and len(rebuilt.preferences) == 20
    assert rebuilt.interaction_count == 0
