"""What every transport adapter gives the agent loop, and the types they share.

An adapter owns one run's conversation in its transport's shape. Per model
call the loop asks it for the request (:meth:`TransportAdapter.request`),
hands it the completion to parse (:meth:`~TransportAdapter.parse`: never
raises, problems come back inside :class:`TurnParse`), runs the calls it
found, and gives it the outcomes to append to the history
(:meth:`~TransportAdapter.record`). The wire formats themselves live in
``toolwire.protocols``; adapters only wire them to tools and messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.agent.final_report import process_final_report
from toolwire.domain import Completion, FinalReport, Message, ToolCall
from toolwire.errors import ProtocolError
from toolwire.protocols.final_report import TRUNCATION_REJECTED
from toolwire.protocols.slots import FinalTag
from toolwire.tools.executor import ToolOutcome, content_text

__all__ = [
    "AGENT_EMPTY_ANSWER",
    "AGENT_NO_ACTION",
    "FINAL_REPORT_TOOL",
    "TOO_MANY_TOOL_CALLS",
    "AgentSetup",
    "Rejected",
    "RequestParts",
    "TransportAdapter",
    "TurnParse",
    "ending_only",
    "finalize_report",
    "format_rejections",
    "args_size",
    "protocol_error",
    "refused_by_error",
    "result_payload",
    "settle_answer",
    "split_over_limit",
]

FINAL_REPORT_TOOL = "agent__final_report"

# Turn-level codes the adapters add to the protocol modules' own.
AGENT_NO_ACTION = "AGENT_NO_ACTION"  # an answer with no call and no final report
AGENT_EMPTY_ANSWER = "AGENT_EMPTY_ANSWER"  # nothing at all (empty text, no tool call)
TOO_MANY_TOOL_CALLS = "TOO_MANY_TOOL_CALLS"  # beyond constraints.max_tool_calls_per_turn
FINAL_TRUNCATED = "FINAL_TRUNCATED"  # an answer cut by the output limit, in a JSON format


@dataclass(frozen=True)
class AgentSetup:
    """What adapters need to know about the run (all resolved before the first call)."""

    transport: str
    pack: Any  # PromptPack
    goal: str
    tools: Any  # ToolRegistry
    final_format: str
    final_schema: dict[str, Any] | None
    max_calls_per_turn: int
    # What the requests are constrained by (providers.structured.constraint_for).
    constraint: str | None
    # native / xml-final for a model that takes no tool definitions (prompt_tools).
    tools_in_prompt: bool = False

    @property
    def use_grammar(self) -> bool:
        return self.constraint == "grammar"


@dataclass(frozen=True)
class RequestParts:
    """The transport-specific part of one completion request."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    grammar: str | None = None
    json_schema: dict[str, Any] | None = None  # the reply's JSON Schema (xct's decision)
    variables: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A call or tag that will not run: counted in ``tool_calls`` and told to the model."""

    code: str
    detail: str
    source: str
    tool: str | None = None
    slot: str | None = None
    args_bytes: int | None = None
    call: ToolCall | None = None  # set when the rejected call holds a place in the results


@dataclass
class TurnParse:
    """One completion, read: what to run, what was refused, how the run ends."""

    calls: list[ToolCall] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    final: FinalReport | None = None
    final_source: str | None = None  # accounting source of the final report
    final_bytes: int = 0
    final_slot: str | None = None
    error: ProtocolError | None = None  # nothing usable, or a final report that failed
    progress: str | None = None
    warnings: list[str] = field(default_factory=list)
    # Codes of tolerated deviations, stored with the attempt (LEAKED_TOOL_CALLS:tool_call).
    recorded: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        """True when the turn moves the run on: something runs, or the run ends."""
        return bool(self.calls) or self.final is not None

    def error_codes(self) -> tuple[str, ...]:
        """Detail codes of the turn's error and of every refusal, each once, in order;
        then what was tolerated and recorded (a repaired final report, recovered calls)."""
        details = list(self.error.details) if self.error else []
        details += [r.code for r in self.rejected]
        if self.final is not None:
            repaired = self.final.metadata.get("repaired", ())
            details += [f"FINAL_REPORT_REPAIRED:{fix}" for fix in repaired]
        return tuple(dict.fromkeys(details + self.recorded))


class TransportAdapter(Protocol):
    transport: str
    # What the next request's grammar shapes (agent.grammar_tools), set by the loop;
    # None: the tools as declared.
    grammar_tools: list[Any] | None
    # Set by the loop: the next grammar admits tool calls only, no ending (no tool ran yet).
    require_call: bool
    # Set by the loop: the next grammar admits the ending only (the run's last model
    # call: a tool called there would return a result no model call reads).
    require_final: bool

    def request(self) -> RequestParts: ...

    def parse(self, completion: Completion) -> TurnParse: ...

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None: ...


def finalize_report(
    status: str, payload: str, setup: AgentSetup, *, truncated: bool = False
) -> FinalReport:
    """Layers 2 and 3 of seed 001's final report, for every transport.

    Raises ProtocolError (FINAL_REPORT_INVALID) when a ``json`` payload does not
    parse or validate, or a ``slack-block-kit`` one has no messages array.
    """
    tag = FinalTag(
        status=status, format=setup.final_format, raw_payload=payload, truncated=truncated
    )
    return process_final_report(tag, expected_format=setup.final_format, schema=setup.final_schema)


def settle_answer(turn: TurnParse, payload: str, setup: AgentSetup, *, source: str,
                  finish_reason: str, status: str = "success") -> None:  # fmt: skip
    """A plain-text answer as the turn's final report (native text, execute answer).

    Cut by the output limit (``length``), it is kept marked truncated, or refused
    for the json and slack-block-kit formats: seed 001's rule for an unclosed FINAL.
    """
    turn.final_source = source
    turn.final_bytes = len(payload.encode("utf-8", "surrogatepass"))
    cut = finish_reason == "length"
    if cut and setup.final_format in TRUNCATION_REJECTED:
        turn.error = protocol_error(
            FINAL_TRUNCATED,
            f"Your {setup.final_format} answer was cut off by the output limit: write a "
            "shorter one.",
            [FINAL_TRUNCATED],
        )
        return
    try:
        turn.final = finalize_report(status, payload, setup, truncated=cut)
    except ProtocolError as exc:
        turn.error = exc


def format_rejections(rejected: Sequence[Rejected], error: ProtocolError | None) -> str:
    """The error lines a repair message carries: protocol error first, then each refusal."""
    lines: list[str] = []
    if error is not None:
        where = f" (line {error.line}, column {error.column})" if error.line else ""
        lines.append(f"- {error.code}{where}: {' '.join(error.message.split())}")
        lines += [f"  - {detail}" for detail in error.details]
    for item in rejected:
        place = " ".join(
            part for part in (f"slot {item.slot}" if item.slot else "", item.tool or "") if part
        )
        lines.append(f"- {item.code}{f' ({place})' if place else ''}: {item.detail}")
    return "\n".join(lines)


def result_payload(outcome: ToolOutcome) -> str:
    """A result's content as prompt text."""
    return content_text(outcome.result.content)


def split_over_limit(
    calls: Sequence[ToolCall], limit: int, source: str
) -> tuple[list[ToolCall], list[Rejected]]:
    """The first ``limit`` calls run; the rest are refused, each keeping its place."""
    refused = [
        Rejected(
            TOO_MANY_TOOL_CALLS,
            f"not run: at most {limit} tool calls per turn",
            source,
            tool=call.tool,
            slot=call.slot,
            args_bytes=args_size(call.args),
            call=call,
        )
        for call in calls[limit:]
    ]
    return list(calls[:limit]), refused


def args_size(args: Any) -> int:
    """UTF-8 bytes of the arguments as JSON (what ``tool_calls.args_bytes`` records)."""
    try:
        return len(json.dumps(args, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError):
        return len(str(args).encode("utf-8"))


def protocol_error(code: str, message: str, details: Sequence[str] = ()) -> ProtocolError:
    return ProtocolError(code=code, message=message, details=list(details))


def refused_by_error(error: ProtocolError, source: str) -> list[Rejected]:
    """A reply refused as a whole (``EXECUTE_INVALID``, ``XCT_INVALID``), as ``tool_calls``
    rows: one per detail code (``call[1]:MISSING_ARG:path``), or one with the error's code."""
    codes = list(error.details) or [error.code]
    return [Rejected(code, error.message, source) for code in codes]


def ending_only(gbnf: str, ending: str) -> str:
    """``gbnf`` with its root narrowed to the rule ``ending`` (the turn's final answer).

    The protocol grammars start with ``root ::= <calls> | <ending>``; the other
    rules stay (llama.cpp accepts unused rules). Raises ValueError when the
    grammar has no such root or rule, so a protocol change shows in the tests.
    """
    head, sep, rest = gbnf.partition("\n")
    if not head.startswith("root ::= ") or f"\n{ending} ::= " not in f"\n{rest}":
        raise ValueError(f"no root or no rule {ending!r} to narrow the grammar to")
    return f"root ::= {ending}{sep}{rest}"
