"""Pure prompt builders: same state -> same prompt, no mutation, token budgets, boundaries."""

from __future__ import annotations

import copy

import pytest

from toolwire.memory.profiles import user_context
from toolwire.memory.prompts import (
    MODE_INSTRUCTIONS,
    build_messages,
    build_prompt,
    compress_context,
)
from toolwire.memory.state import AgentState, ReasoningContext, UserProfile
from toolwire.memory.tokens import (
    TRUNCATION_MARK,
    estimate_tokens,
    token_counter,
    truncate_to_tokens,
)

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    """A tokenizer that disagrees with the byte estimate: one token per word."""
    return len(text.split())


def _state() -> AgentState:
    profile = UserProfile("ann", communication_style="concise")
    profile.update_from_interaction(
        {"preferences": {"naming_style": "Sentence case"}, "interests": ["databases"]}
    )
    state = AgentState.start("tidy the runbooks", user_id="ann", user_profile=profile)
    state.reasoning.strategy = "retag by subsystem"
    for i in range(8):
        state.reasoning.update_facts(f"fact{i}", {"n": i})
        state.reasoning.add_insight(f"insight {i}")
    state.reasoning.record_thinking("read the etcd notes first", [])
    state.execution.add_message("assistant", "listing the folder")
    state.execution.complete_tool_calls(
        [{"name": "list_dir", "success": True}, {"name": "read_file", "success": False}]
    )
    return state


TOOLS = [
    {"name": "list_dir", "description": "List a folder"},
    ("read_file", "Read one file"),
]


def test_same_state_same_prompt_and_messages_without_mutation() -> None:
    state = _state()
    before = copy.deepcopy(state)
    first = build_prompt(state, TOOLS)
    assert build_prompt(state, TOOLS) == first
    assert build_messages(state, TOOLS) == build_messages(state, TOOLS)
    assert state == before  # nothing was changed, not even timestamps or list order


def test_equal_states_built_apart_give_identical_prompts() -> None:
    one, two = _state(), _state()
    # Only the timestamps differ between the two; the builders drop them.
    assert build_prompt(one, TOOLS) == build_prompt(two, TOOLS)
    assert build_messages(one) == build_messages(two)
    assert all(set(m) == {"role", "content"} for m in build_messages(one))


def test_prompt_sections_follow_the_seed() -> None:
    prompt = build_prompt(_state(), TOOLS)
    assert prompt.startswith("USER CONTEXT:\nCOMMUNICATION: concise\n")
    assert "PREFERENCES: naming_style: Sentence case" in prompt
    assert "REASONING CONTEXT:\nGOAL: tidy the runbooks\nSTRATEGY: retag by subsystem\n" in prompt
    # Recent facts (last 5) and insights (last 3) only.
    assert 'FACTS: fact3: {"n": 3}; ' in prompt and "fact2" not in prompt
    assert "INSIGHTS: insight 5; insight 6; insight 7" in prompt and "insight 4" not in prompt
    assert "LAST THINKING: read the etcd notes first" in prompt
    assert "RECENT RESULTS:\n✓ list_dir\n✗ read_file\n" in prompt
    assert "AVAILABLE TOOLS:\n- list_dir: List a folder\n- read_file: Read one file\n" in prompt
    assert "Iteration 0/10" in prompt and '"switch_mode": "fast|deep"' in prompt


def test_no_profile_means_no_user_context() -> None:
    state = AgentState.start("q")
    assert "USER CONTEXT" not in build_prompt(state)
    assert user_context(None) == "" and user_context(UserProfile("x")) == ""


@pytest.mark.parametrize(
    ("mode", "marker"), [("fast", "FAST MODE"), ("deep", "DEEP MODE"), ("adapt", "FAST MODE")]
)
def test_mode_instructions(mode: str, marker: str) -> None:
    state = AgentState.start("q", mode=mode)
    prompt = build_prompt(state)
    assert marker in prompt
    other = "DEEP MODE" if marker == "FAST MODE" else "FAST MODE"
    assert other not in prompt
    # An explicit mode overrides the state's (e.g. the engine escalates for one call).
    assert "DEEP MODE" in build_prompt(state, mode="deep")
    assert set(MODE_INSTRUCTIONS) == {"fast", "deep", "adapt"}


def test_a_mode_switch_changes_the_next_prompt() -> None:
    from toolwire.memory.state import apply_reasoning_update

    state = AgentState.start("q")
    assert "FAST MODE" in build_prompt(state)
    apply_reasoning_update(state, {"switch_mode": "deep"})
    assert "DEEP MODE" in build_prompt(state)


# -- token budgets -------------------------------------------------------------------------


@pytest.mark.parametrize("count", [estimate_tokens, words], ids=["estimate", "words"])
@pytest.mark.parametrize("budget", [1, 3, 8, 20, 40, 1000])
def test_compress_context_stays_within_budget_at_a_boundary(count, budget: int) -> None:
    reasoning = ReasoningContext(goal="organise " * 30, strategy="one note at a time " * 10)
    reasoning.add_insight("etcd notes mention compaction " * 5)
    text = compress_context(reasoning, budget, count)
    assert count(text) <= budget
    full = compress_context(reasoning, 100_000, count)
    if text and text != full:
        bare = text == TRUNCATION_MARK.strip()  # not even one word fits
        assert bare or text.endswith(TRUNCATION_MARK)
        kept = "" if bare else text.removesuffix(TRUNCATION_MARK)
        assert full.startswith(kept)
        # Cut at a word or line boundary: the next character of the full text is a separator.
        assert kept == "" or full[len(kept)] in " \n"


def test_budget_is_counted_with_the_given_tokenizer_not_characters() -> None:
    reasoning = ReasoningContext(goal="a " * 50)  # 100 chars, 51 words, ~27 estimated tokens
    by_words = compress_context(reasoning, 30, words)
    by_estimate = compress_context(reasoning, 30, estimate_tokens)
    assert words(by_words) <= 30 < words(by_estimate) + 30
    assert by_words != by_estimate


def test_truncate_keeps_whole_lines_first_then_whole_words() -> None:
    text = "alpha beta\ngamma delta epsilon\nzeta"
    assert truncate_to_tokens(text, 100, words) == text
    assert truncate_to_tokens(text, 5, words) == "alpha beta\ngamma delta [...]"
    assert truncate_to_tokens(text, 4, words) == "alpha beta\ngamma [...]"
    assert truncate_to_tokens(text, 3, words) == "alpha beta [...]"
    assert truncate_to_tokens(text, 2, words) == "alpha [...]"
    assert truncate_to_tokens(text, 1, words) == "[...]"
    assert truncate_to_tokens(text, 0, words) == ""
    assert truncate_to_tokens("", 10, words) == ""


def test_build_messages_drops_the_oldest_turns_but_keeps_the_query() -> None:
    state = AgentState.start("the query")
    for i in range(6):
        state.execution.add_message("assistant", f"turn {i} " + "x " * 20)
    everything = build_messages(state)
    assert [m["role"] for m in everything] == ["system", "user"] + ["assistant"] * 6
    system_cost = words(everything[0]["content"])
    trimmed = build_messages(state, max_tokens=system_cost + 2 + 2 * 22, count_tokens=words)
    assert [m["content"][:6] for m in trimmed[1:]] == ["the qu", "turn 4", "turn 5"]
    assert sum(words(m["content"]) for m in trimmed) <= system_cost + 2 + 2 * 22


# -- which tokenizer -----------------------------------------------------------------------


class _Llama:
    def __init__(self) -> None:
        self.calls: list[tuple[bytes, bool]] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        self.calls.append((text, add_bos))
        return list(range(len(text.split())))


def test_token_counter_prefers_the_models_tokenizer() -> None:
    class WithCount:
        def count_tokens(self, text: str) -> int:
            return 7

    class WithLlama:
        llama = _Llama()

    class WithTokenize:  # LlamaCppProvider's shape: str in, token ids out
        def tokenize(self, text: str) -> list[int]:
            return [0] * len(text)

    assert token_counter(WithCount())("anything") == 7
    with_llama = WithLlama()
    assert token_counter(with_llama)("one two three") == 3
    assert with_llama.llama.calls == [(b"one two three", False)]  # no BOS in a count
    assert token_counter(WithTokenize())("abcdefgh") == 8
    assert token_counter(object()) is estimate_tokens
    assert token_counter(None)("abcdefgh") == 2  # ceil(8 bytes / 4)


def test_a_failing_tokenizer_falls_back_to_the_estimate() -> None:
    class Broken:
        def count_tokens(self, text: str) -> int:
            raise RuntimeError("tokenizer crashed")

    assert token_counter(Broken())("abcdefgh") == 2
