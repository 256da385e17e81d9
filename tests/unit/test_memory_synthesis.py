"""The impression synthesizer: reply vectors, malformed output, every-third consolidation."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest

from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import ProviderError
from toolwire.memory.state import UserProfile
from toolwire.memory.synthesis import (
    CONSOLIDATION_SCHEMA,
    INSIGHTS_SCHEMA,
    MAX_REPLY_BYTES,
    SYNTHESIS_EVERY,
    Interaction,
    learn,
    parse_json_reply,
)
from toolwire.memory.tokens import estimate_tokens

pytestmark = pytest.mark.unit

VECTORS = Path(__file__).resolve().parents[1] / "data" / "memory"
SCHEMAS = {"insights": INSIGHTS_SCHEMA, "consolidation": CONSOLIDATION_SCHEMA}


def _cases(kind: str) -> list[tuple[str, Path]]:
    return [
        (schema, path)
        for schema in SCHEMAS
        for path in sorted((VECTORS / schema / kind).glob("*.txt"))
        if not path.name.endswith(".expected.txt")
    ]


def _id(case: tuple[str, Path]) -> str:
    return f"{case[0]}/{case[1].stem}"


@pytest.mark.parametrize("case", _cases("valid"), ids=_id)
def test_valid_replies_yield_the_expected_object(case: tuple[str, Path]) -> None:
    schema, path = case
    value, problem = parse_json_reply(path.read_text(encoding="utf-8"), SCHEMAS[schema])
    assert problem == ""
    assert value == json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", _cases("invalid"), ids=_id)
def test_invalid_replies_are_dropped_with_the_expected_reason(case: tuple[str, Path]) -> None:
    schema, path = case
    expected = path.with_name(path.stem + ".expected.txt").read_text(encoding="utf-8").strip()
    value, problem = parse_json_reply(path.read_text(encoding="utf-8"), SCHEMAS[schema])
    assert value is None
    assert problem.startswith(expected), problem


def test_there_are_vectors() -> None:
    assert len(_cases("valid")) >= 5 and len(_cases("invalid")) >= 10


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"goals": ["' + "x" * MAX_REPLY_BYTES + '"]}', "reply too large"),
        ("é" * (MAX_REPLY_BYTES // 2 + 1), "reply too large"),  # bytes, not characters
        ("[" * 5000 + "]" * 5000, "not valid JSON: RecursionError"),
        ('{"goals": ' + "[" * 3000 + "]" * 3000 + "}", "not valid JSON: RecursionError"),
        (None, "reply is NoneType, not text"),
    ],
    ids=["huge", "huge-multibyte", "deep-array", "deep-in-object", "not-text"],
)
def test_huge_deep_and_non_text_replies_are_dropped(reply: object, expected: str) -> None:
    value, problem = parse_json_reply(reply, INSIGHTS_SCHEMA)
    assert value is None and problem.startswith(expected), problem


# -- learn: the synthesizer's decisions, without a store ------------------------------------


class Script:
    """A fake ``complete``: returns scripted texts (or raises) and records each request."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []

    def __call__(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply)


RUN = Interaction(
    query="Organise the notes", response="run ok\napplied retag_note bread", success=True
)


def test_every_third_interaction_is_consolidated() -> None:
    profile = UserProfile("ann")
    sources, calls = [], []
    for i in range(1, 7):
        replies = [json.dumps({"interests": [f"topic {i}"]})]
        if i % SYNTHESIS_EVERY == 0:
            replies.append(json.dumps({"interests": [f"consolidated {i}"], "goals": ["tidy"]}))
        script = Script(*replies)
        learned = learn(profile, script, RUN)
        profile = learned.profile
        sources.append(learned.source)
        calls.append(len(script.requests))
        assert script.replies == []  # each scripted reply was asked for
    assert sources == ["synthesis", "synthesis", "consolidation"] * 2
    assert calls == [1, 1, 2, 1, 1, 2]
    assert profile.interaction_count == 6
    assert profile.synthesis_version == 3  # two consolidations
    # After the second consolidation the interests are its list (replace, not merge).
    assert profile.interests == ["consolidated 6"]


def test_the_consolidation_prompt_carries_the_current_profile() -> None:
    profile = UserProfile("ann", interaction_count=2, communication_style="terse")
    script = Script("{}", "{}")
    learn(profile, script, RUN)
    extract, consolidate = (r.messages[-1]["content"] for r in script.requests)
    assert "User request: Organise the notes" in extract and "Success: true" in extract
    assert "CURRENT PROFILE:\nUSER CONTEXT:\nCOMMUNICATION: terse" in consolidate
    assert all(r.temperature == 0.0 and r.max_tokens == 300 for r in script.requests)


@pytest.mark.parametrize(
    "bad",
    [
        "I think the user likes cooking.",
        '{"goals": "cooking"}',
        "{" * 40_000,
        ProviderError("boom", code="LLM_PROVIDER_TIMEOUT", transient=True),
    ],
    ids=["prose", "wrong-schema", "huge", "provider-error"],
)
def test_malformed_insights_are_dropped_with_a_warning_and_still_counted(
    bad: str | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    profile = UserProfile("ann", interests=["cooking"])
    with caplog.at_level(logging.WARNING, logger="toolwire.memory.synthesis"):
        learned = learn(profile, Script(bad), RUN)
    assert learned.source == "synthesis"
    assert learned.profile.interaction_count == 1
    assert learned.profile.interests == ["cooking"]  # nothing half-applied
    assert len(learned.warnings) == 1 and learned.warnings[0].startswith("insights dropped: ")
    assert learned.warnings[0] in caplog.text


def test_a_malformed_consolidation_keeps_the_merged_insights() -> None:
    profile = UserProfile("ann", interaction_count=2)
    learned = learn(profile, Script('{"interests": ["etcd"]}', '{"goals": 1}'), RUN)
    assert learned.source == "synthesis"
    assert learned.profile.interests == ["etcd"] and learned.profile.synthesis_version == 1
    assert learned.warnings[0].startswith("consolidated profile dropped: does not match")


def test_without_a_model_the_interaction_counts_and_nothing_is_asked() -> None:
    profile = UserProfile("ann", interaction_count=2)  # the next one is a third
    learned = learn(profile, None, RUN)
    assert learned.profile.interaction_count == 3 and learned.source == "synthesis"
    assert learned.warnings == ("no model call: the run failed on its provider",)


def test_learn_does_not_change_the_profile_it_was_given() -> None:
    profile = UserProfile("ann", goals=["old"])
    before = copy.deepcopy(profile)
    learned = learn(profile, Script('{"goals": ["new"]}'), RUN)
    assert profile == before
    assert learned.profile.goals == ["old", "new"]


def test_the_extraction_prompt_is_bounded_whatever_the_run_produced() -> None:
    huge = Interaction(
        query="q " * 5000, response="op\n" * 20_000, success=False, notes=("n " * 9000,)
    )
    script = Script("{}")
    learn(UserProfile("ann"), script, huge)
    prompt = script.requests[0].messages[-1]["content"]
    assert estimate_tokens(prompt) < 900
    assert "Success: false" in prompt and "[...]" in prompt
