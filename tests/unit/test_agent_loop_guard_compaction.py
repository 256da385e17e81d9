"""The loop guard sees calls that compaction cut from the request (issue 46): a repeat
after its first result was compacted away passes once (the model gets it back), and
every later identical call is a repeat again, however much the history is compacted."""

from __future__ import annotations

import pytest

from toolwire.agent.loop_guard import AGENT_LOOP_DETECTED, REPEATED_CALL, LoopGuard
from toolwire.domain import ToolCall, ToolResult
from toolwire.tools.executor import ToolOutcome

pytestmark = pytest.mark.unit


def _read(n: int) -> ToolOutcome:
    call = ToolCall(f"c{n}", "read_file", {"path": "notes/big.md"})
    result = ToolResult(call.id, "read_file", "success", "x" * 3600)
    return ToolOutcome(call, result, "success", None, 24, 3600)


def test_identical_reads_under_growing_compaction_end_the_run() -> None:
    guard = LoopGuard()
    verdicts: list[str] = []
    stop = None
    # A 4K window: every request compacts more messages than the one before.
    for turn in range(6):
        outcomes, repeated = guard.check_outcomes([_read(turn)], turn=turn, compactions=turn + 1)
        verdicts.append(outcomes[0].status if outcomes[0].error is None else REPEATED_CALL)
        stop = guard.end_turn(repeated)
        if stop is not None:
            break
    # New, then fetched back once after compaction; then only repeats until the guard stops.
    assert verdicts == ["success", "success", REPEATED_CALL, REPEATED_CALL, REPEATED_CALL]
    assert stop is not None and stop.code == AGENT_LOOP_DETECTED


def test_without_compaction_the_second_identical_read_is_a_repeat() -> None:
    guard = LoopGuard()
    guard.check_outcomes([_read(0)], turn=0, compactions=0)
    outcomes, repeated = guard.check_outcomes([_read(1)], turn=1, compactions=0)
    assert repeated and outcomes[0].error == f"{REPEATED_CALL}: read_file"
