"""The first-tool side request as an attempt row of its own (``agent.first_tool``).

Its number is ``SIDE_ATTEMPT`` (-1): before the turn's first try (0) and its repairs
(1..), so the store's key (run_id, turn, attempt) never collides and ordering by
(turn, attempt) is the order the requests were sent in. Its tokens and latency are
its own, never the transport attempt's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire.agent.first_tool import (
    FIRST_TOOL_KIND,
    FIRST_TOOL_NOT_NAMED,
    SIDE_ATTEMPT,
    choice_attempt,
    choice_request,
    read_choice,
)
from toolwire.agent.grammar_tools import grammar_tools
from toolwire.domain import Attempt, Completion
from toolwire.spec.model import ToolSpec
from toolwire.store.quality_checks import ATTEMPT_KINDS
from toolwire.tools import build_registry

pytestmark = pytest.mark.unit


def _declared(root: Path) -> list[object]:
    names = ("list_dir", "read_file", "write_file")
    specs = [
        ToolSpec(name=n, description=f"does {n}", implementation=f"builtin:{n}") for n in names
    ]
    return build_registry(specs, workspace=root).tools  # type: ignore[return-value]


def _side(tmp_path: Path, text: str) -> tuple[Attempt, Any]:
    declared = _declared(tmp_path)
    shaped = grammar_tools(declared, tmp_path)
    request = choice_request(shaped, declared, "Read plan.md.", temperature=0.0)
    assert request is not None
    reply = Completion(text=text, input_tokens=120, output_tokens=3, latency_ms=42.0)
    chosen = read_choice(reply.text, shaped)
    side = choice_attempt(
        turn=0,
        request_id="abcd1234-001-first_tool",
        request=request,
        reply=reply,
        raw_text=reply.text,
        chosen=chosen,
        started_at=1_700_000_000.0,
    )
    return side, chosen


def _transport_attempt(n: int) -> Attempt:
    return Attempt(
        turn=0,
        attempt=n,
        kind="initial" if n == 0 else "repair",
        request_id=f"abcd1234-001-{n}",
        prompt=[],
        raw_text="x",
        parse_ok=False,
        error_code=None,
        error_codes=(),
        input_tokens=500,
        output_tokens=40,
        latency_ms=900.0,
        finish_reason="stop",
        started_at=1_700_000_001.0 + n,
    )


def test_the_side_request_is_attempt_minus_one_and_sorts_before_the_turns_tries(
    tmp_path: Path,
) -> None:
    side, chosen = _side(tmp_path, "read_file")
    assert chosen is not None and chosen.name == "read_file"
    assert (side.turn, side.attempt, side.kind) == (0, SIDE_ATTEMPT, FIRST_TOOL_KIND)
    assert side.kind in ATTEMPT_KINDS  # the quality check admits it
    # A turn at its whole repair budget (first try + 2 repairs), in the order sent.
    sent = [side, *(_transport_attempt(n) for n in range(3))]
    keys = [(a.turn, a.attempt) for a in sent]
    assert len(set(keys)) == len(keys)  # the primary key never collides
    assert sorted(sent, key=lambda a: (a.turn, a.attempt)) == sent
    assert [a.attempt for a in sent[1:]] == [0, 1, 2]  # the tries keep their numbers


def test_the_side_attempt_keeps_its_own_text_prompt_and_cost(tmp_path: Path) -> None:
    side, _ = _side(tmp_path, "read_file")
    assert side.raw_text == "read_file" and side.parse_ok and side.error_code is None
    assert side.prompt[-1] == {"role": "user", "content": "Task: Read plan.md.\nTool:"}
    assert (side.input_tokens, side.output_tokens, side.latency_ms) == (120, 3, 42.0)
    assert side.request_id.endswith("-first_tool")


def test_a_reply_naming_no_tool_is_kept_and_marked(tmp_path: Path) -> None:
    side, chosen = _side(tmp_path, "read_fi")  # cut at max_tokens, say
    assert chosen is None
    assert (side.raw_text, side.parse_ok, side.error_code) == (
        "read_fi",
        False,
        FIRST_TOOL_NOT_NAMED,
    )
