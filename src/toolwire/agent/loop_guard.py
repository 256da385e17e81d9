"""The loop guard: a model that repeats itself is told so, and a run that keeps at it ends.

Small models loop: the same ``list_dir`` 28 times, the same failing call six
times, until ``max_iterations`` (20+ minutes in process). Repeating a call
that already gave its answer cannot move a run on, so the guard, in the one
agent loop every transport shares:

* a call with the same tool and arguments as an earlier one that gets the
  same result (or fails the same way) is answered with an error result that
  says so (``REPEATED_CALL`` / ``REPEATED_FAILURE``) instead of the result
  again; the first result is still in the conversation, unless the history
  was compacted since, in which case the repeat is the model getting it back
  and passes, *once*: the guard remembers every call, whatever compaction
  cut from the request, so a later identical call is a repeat again (issue
  46: once a 4K window compacted on every request, 4 identical reads in a row
  all passed); under a grammar, the repeated tool is left out of the next
  request's grammar (``agent.grammar_tools``);
* an unusable answer identical to an earlier one (the same text, failing the
  same way) gets the same note added to its error;
* after ``MAX_REPEATS_IN_A_ROW`` turns in a row that only repeated, or
  ``MAX_REPEATS`` in all, the run ends ``Failed`` with ``AGENT_LOOP_DETECTED``.

A turn with at least one new call resets the run of repeats. The guard never
runs anything itself and compares what the executor returned, so a call
whose result changed (a file written in between) is not a repeat.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from toolwire.domain import ToolResult
from toolwire.errors import ProtocolError, ToolwireError
from toolwire.tools.executor import ToolOutcome, content_text

__all__ = [
    "AGENT_LOOP_DETECTED",
    "MAX_REPEATS",
    "MAX_REPEATS_IN_A_ROW",
    "REPEATED_ANSWER",
    "REPEATED_CALL",
    "REPEATED_FAILURE",
    "LoopGuard",
]

AGENT_LOOP_DETECTED = "AGENT_LOOP_DETECTED"
REPEATED_CALL = "REPEATED_CALL"
REPEATED_FAILURE = "REPEATED_FAILURE"
REPEATED_ANSWER = "REPEATED_ANSWER"
MAX_REPEATS_IN_A_ROW = 3
MAX_REPEATS = 5


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Seen:
    turn: int
    compactions: int  # messages compacted when it was seen
    fetched_again: bool = False  # a repeat already passed as getting a compacted result back


@dataclass
class LoopGuard:
    """What a run has done so far, by call and by failing answer."""

    calls: dict[str, _Seen] = field(default_factory=dict)
    answers: dict[str, _Seen] = field(default_factory=dict)
    in_a_row: int = 0
    total: int = 0
    # Tools whose latest call was a repeat: the next grammar leaves them out
    # (agent.grammar_tools), so a constrained model must take another step.
    blocked: set[str] = field(default_factory=set)

    def _repeat(
        self, table: dict[str, _Seen], key: str, turn: int, compactions: int
    ) -> _Seen | None:
        seen = table.get(key)
        if seen is None:
            table[key] = _Seen(turn, compactions)
            return None
        if compactions > seen.compactions and not seen.fetched_again:
            # Its first answer may have been compacted away since: getting it back once is
            # fair; the guard still holds the call, so the next identical one is a repeat.
            table[key] = _Seen(seen.turn, compactions, fetched_again=True)
            return None
        return seen

    def check_outcomes(
        self, outcomes: list[ToolOutcome], *, turn: int, compactions: int
    ) -> tuple[list[ToolOutcome], bool]:
        """The outcomes the model will read, repeats replaced; and whether all were repeats."""
        out: list[ToolOutcome] = []
        fresh = False
        self.blocked = set()
        for outcome in outcomes:
            call = outcome.call
            result = outcome.result
            key = _digest(call.tool, call.args, outcome.status, content_text(result.content))
            seen = self._repeat(self.calls, key, turn, compactions)
            if seen is None:
                fresh = True
                out.append(outcome)
                continue
            out.append(_repeated(outcome, seen.turn))
            self.blocked.add(call.tool)
        return out, bool(outcomes) and not fresh

    def check_answer(
        self, raw_text: str, error: ProtocolError | None, *, turn: int, compactions: int
    ) -> ProtocolError | None:
        """``error`` with a note when this failing answer was given before (else as is)."""
        if error is None:
            return None
        key = _digest(raw_text, error.code, list(error.details))
        seen = self._repeat(self.answers, key, turn, compactions)
        if seen is None:
            return error
        note = (
            f" You gave this same answer before (turn {seen.turn + 1}) and it failed the same "
            "way: write a different one."
        )
        return ProtocolError(
            code=error.code,
            message=error.message + note,
            details=[*error.details, REPEATED_ANSWER],
            line=error.line,
            column=error.column,
        )

    def end_turn(self, repeated: bool) -> ToolwireError | None:
        """Count one answer; the run's failure once it keeps repeating, else None."""
        if not repeated:
            self.in_a_row = 0
            return None
        self.in_a_row += 1
        self.total += 1
        if self.in_a_row >= MAX_REPEATS_IN_A_ROW or self.total >= MAX_REPEATS:
            return ToolwireError(
                f"the model kept repeating itself ({self.in_a_row} answers in a row, "
                f"{self.total} in all, only repeated calls or failures already answered)",
                code=AGENT_LOOP_DETECTED,
            )
        return None


def _repeated(outcome: ToolOutcome, turn: int) -> ToolOutcome:
    """The outcome as the model reads it: an error result that says it is a repeat."""
    call = outcome.call
    if outcome.status == "success":
        code = REPEATED_CALL
        text = (
            f"{code}: you already called {call.tool} with these arguments (turn {turn + 1}) "
            "and got this same result; it is in the conversation above. Do not call it again: "
            "use that result, take the next step, or finish."
        )
    else:
        code = REPEATED_FAILURE
        text = (
            f"{code}: this exact call already failed the same way (turn {turn + 1}): "
            f"{content_text(outcome.result.content)[:300]} Change the arguments or do "
            "something else."
        )
    result: ToolResult = replace(outcome.result, status="failure", content=text)
    return replace(
        outcome,
        result=result,
        status="failure",
        error=f"{code}: {call.tool}",
        result_bytes=len(text.encode("utf-8")),
    )
