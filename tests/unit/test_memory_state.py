"""Seed 004 state: every bound, the loop controls, and model updates that never crash."""

from __future__ import annotations

import json

import pytest

from toolwire.errors import UsageError
from toolwire.memory import state as st
from toolwire.memory.state import (
    AgentState,
    ExecutionState,
    ReasoningContext,
    UserProfile,
    apply_reasoning_update,
    should_continue,
    stop_condition,
)

pytestmark = pytest.mark.unit


# -- bounds --------------------------------------------------------------------------------


def test_bounds_are_the_seeds() -> None:
    assert (st.MAX_INSIGHTS, st.MAX_FACTS, st.MAX_THOUGHTS) == (10, 20, 5)
    assert (st.MAX_GOALS, st.MAX_EXPERTISE, st.MAX_PROJECTS, st.MAX_PATTERNS) == (10, 15, 10, 5)


def test_insights_keep_the_last_ten_without_duplicates_or_blanks() -> None:
    reasoning = ReasoningContext()
    for i in range(25):
        reasoning.add_insight(f"insight {i}")
        reasoning.add_insight(f"insight {i}")  # duplicate: ignored
    reasoning.add_insight("   ")
    reasoning.add_insight(None)
    assert reasoning.insights == [f"insight {i}" for i in range(15, 25)]


def test_facts_keep_the_twenty_most_recently_set() -> None:
    reasoning = ReasoningContext()
    for i in range(30):
        reasoning.update_facts(f"k{i}", i)
    assert list(reasoning.facts) == [f"k{i}" for i in range(10, 30)]
    reasoning.update_facts("k12", "updated")  # an update makes the key most recent
    reasoning.update_facts("", "ignored")
    assert len(reasoning.facts) == 20
    assert list(reasoning.facts)[-1] == "k12" and reasoning.facts["k12"] == "updated"
    reasoning.update_facts("k5", "back")  # a new key evicts the least recently set one
    assert list(reasoning.facts)[0] == "k11" and list(reasoning.facts)[-2:] == ["k12", "k5"]
    assert "k10" not in reasoning.facts and "" not in reasoning.facts


def test_thoughts_keep_the_last_five() -> None:
    reasoning = ReasoningContext()
    for i in range(12):
        reasoning.record_thinking(f"step {i}", [{"name": "t", "args": {}}])
    assert [t["thinking"] for t in reasoning.thoughts] == [f"step {i}" for i in range(7, 12)]
    assert reasoning.thoughts[-1]["tool_calls"] == [{"name": "t", "args": {}}]


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


def test_execution_collections_are_bounded() -> None:
    execution = ExecutionState(query="q")
    for i in range(40):
        execution.record_error(f"e{i}")
        execution.notify({"n": i})
    assert execution.errors == [f"e{i}" for i in range(30, 40)]
    assert [n["n"] for n in execution.notifications] == list(range(20, 40))


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


# -- loop control ----------------------------------------------------------------------------


def _running(**kwargs: object) -> ExecutionState:
    execution = ExecutionState(query="q", **kwargs)  # type: ignore[arg-type]
    execution.set_tool_calls([{"name": "read_file", "args": {}}])
    return execution


def test_seed_rule_continues_only_with_pending_calls() -> None:
    execution = ExecutionState(query="q")
    assert stop_condition(execution) == "no_pending_calls" and not should_continue(execution)
    execution.set_tool_calls([{"name": "read_file"}])
    assert should_continue(execution)
    execution.complete_tool_calls([{"name": "read_file", "success": True}])
    assert execution.pending_calls == [] and not should_continue(execution)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: setattr(e, "response", "done"), "response"),
        (lambda e: setattr(e, "stop_reason", "cancelled"), "cancelled"),
        (lambda e: setattr(e, "iteration", 10), "max_iterations"),
        (lambda e: e.record_usage(5000), "token_budget_exhausted"),
        (lambda e: [e.record_error("bad") for _ in range(3)], "too_many_errors"),
    ],
)
def test_each_control_stops_the_loop(change, reason: str) -> None:
    execution = _running(token_budget=5000)
    assert should_continue(execution)
    change(execution)
    assert stop_condition(execution) == reason
    assert not should_continue(execution)


def test_a_success_resets_the_error_streak_and_the_budget_counts_up() -> None:
    execution = _running(token_budget=100)
    execution.record_error("a")
    execution.record_error("b")
    execution.record_success()
    execution.record_error("c")
    execution.record_usage(60)
    execution.record_usage(-10)  # negative usage is ignored
    assert should_continue(execution)
    execution.record_usage(40)
    assert stop_condition(execution) == "token_budget_exhausted"
    for _ in range(9):
        execution.advance_iteration()
    assert execution.iteration == 9


@pytest.mark.parametrize(
    "kwargs", [{"mode": "slow"}, {"max_iterations": 0}, {"max_consecutive_errors": 0}]
)
def test_bad_settings_are_usage_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        ExecutionState(query="q", **kwargs)  # type: ignore[arg-type]


# -- model updates ---------------------------------------------------------------------------


def test_a_model_reply_updates_reasoning_calls_response_and_mode() -> None:
    state = AgentState.start("tidy my notes", user_id="ann")
    assert state.reasoning.goal == "tidy my notes"
    assert state.execution.messages[0]["role"] == "user"
    warnings = apply_reasoning_update(
        state,
        {
            "thinking": "list the folder first",
            "tool_calls": [{"name": "list_dir", "args": {"path": "."}}],
            "context_updates": {
                "strategy": "list, then read",
                "insights": ["notes are markdown"],
                "facts": {"notes": 12},
            },
            "switch_mode": "deep",
        },
    )
    assert warnings == []
    assert state.execution.pending_calls == [{"name": "list_dir", "args": {"path": "."}}]
    assert state.reasoning.strategy == "list, then read"
    assert state.reasoning.insights == ["notes are markdown"]
    assert state.reasoning.facts == {"notes": 12}
    assert state.execution.mode == "deep"
    apply_reasoning_update(state, {"response": "done", "switch_mode": "fast"})
    assert state.execution.response == "done" and state.execution.mode == "fast"
    assert stop_condition(state.execution) == "response"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("not a dict", "reply must be a JSON object"),
        ({"tool_calls": "list_dir"}, "tool_calls must be a list"),
        ({"tool_calls": [{"name": "x"}, "y"]}, "tool_calls entries must be objects"),
        ({"thinking": ["x"]}, "thinking must be a string"),
        ({"context_updates": "x"}, "context_updates must be an object"),
        ({"context_updates": {"goal": 5}}, "context_updates.goal must be a non-empty string"),
        ({"context_updates": {"insights": "x"}}, "context_updates.insights must be a list"),
        ({"switch_mode": "turbo"}, "switch_mode must be one of fast, deep, adapt"),
        ({"switch_mode": ["deep"]}, "switch_mode must be one of"),
    ],
)
def test_malformed_replies_warn_and_leave_the_state_usable(reply: object, expected: str) -> None:
    state = AgentState.start("q")
    warnings = apply_reasoning_update(state, reply)
    assert any(expected in w for w in warnings), warnings
    assert state.execution.mode == "adapt" and state.reasoning.goal == "q"
    assert state.execution.pending_calls in ([], [{"name": "x"}])
