"""The ``xct`` adapter (seed 003): one JSON decision per turn, the system owns the loop.

A ``next_step`` runs its one tool; ``done`` ends the run with its message as
the final report. Whatever goes wrong (a reply that is not one decision, an
unknown tool, bad arguments, a failing tool) comes back to the model as the
next input, ``{"status": "error", "message", "details"}``: errors are
ordinary results here, and nothing is retried behind the model's back.

Constrained, each request carries the GBNF grammar of one decision, or its
JSON Schema for servers that take a schema and no grammar (OpenAI, Ollama).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.agent.pack import opening_messages
from toolwire.agent.transports.base import (
    AgentSetup,
    RequestParts,
    TurnParse,
    ending_only,
    finalize_report,
    refused_by_error,
)
from toolwire.domain import Completion, Message
from toolwire.errors import ProtocolError
from toolwire.protocols.xct import (
    NextStep,
    decision_schema,
    parse_decision,
    render_system_response,
    render_tool_result,
    render_xct_instructions,
    xct_grammar,
)
from toolwire.tools.executor import ToolOutcome

__all__ = ["XctAdapter"]


class XctAdapter:
    transport = "xct"

    def __init__(self, setup: AgentSetup) -> None:
        self.setup = setup
        self.history: list[Message] = opening_messages(
            setup.pack,
            "xct",
            goal=setup.goal,
            protocol=render_xct_instructions(setup.tools.tools).rstrip("\n"),
        )
        self.decisions = 0
        self.grammar_tools: list[Any] | None = None
        self.require_call = False
        self.require_final = False

    def request(self) -> RequestParts:
        grammar = schema = None
        if self.setup.constraint == "grammar":
            grammar = xct_grammar(
                self.grammar_tools or self.setup.tools.tools,
                done=self.require_final or not self.require_call,
            )
            if self.require_final:
                grammar = ending_only(grammar, "done")
        elif self.setup.constraint == "json_schema":
            schema = decision_schema(self.setup.tools.tools)
        return RequestParts(messages=list(self.history), grammar=grammar, json_schema=schema)

    def parse(self, completion: Completion) -> TurnParse:
        self.decisions += 1
        try:
            # With the tools, an unknown tool or bad arguments is an invalid decision too:
            # the system validates the proposal before anything runs (seed 003, step 3).
            decision = parse_decision(completion.text, tools=self.setup.tools.schemas())
        except ProtocolError as exc:
            return TurnParse(error=exc, rejected=refused_by_error(exc, "json"))
        if isinstance(decision, NextStep):
            call = decision.to_call(f"step-{self.decisions}")
            return TurnParse(
                calls=[call], progress=decision.goal or None, warnings=list(decision.warnings)
            )
        turn = TurnParse(final_source="json", warnings=list(decision.warnings))
        turn.final_bytes = len(decision.message.encode("utf-8"))
        try:
            turn.final = finalize_report("success", decision.message, self.setup)
        except ProtocolError as exc:
            turn.error = exc
        return turn

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None:
        self.history.append({"role": "assistant", "content": completion.text})
        if outcomes:
            reply = render_tool_result(outcomes[0].result)
        elif parsed.error is not None:
            reply = render_system_response(error=parsed.error)
        else:
            return  # done: the run ends, nothing to answer
        self.history.append({"role": "user", "content": reply})
