"""The ``execute`` adapter (seed 000): ``<execute>`` blocks in, ``<results>`` arrays back.

The whole block is validated before anything runs (``EXECUTE_INVALID``: the
block is refused and the errors go back to the model); valid calls run one
after another, a failure never stopping the next, and ``<results>`` lists
every call in order. The history keeps the model's text only up to
``</execute>``: what it wrote after that was never read (the results it
might have imagined must not look real to it later). A reply without an
``<execute>`` block is the final answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.agent.pack import opening_messages, render_repair
from toolwire.agent.transports.base import (
    AGENT_EMPTY_ANSWER,
    AgentSetup,
    RequestParts,
    TurnParse,
    ending_only,
    format_rejections,
    protocol_error,
    refused_by_error,
    settle_answer,
    split_over_limit,
)
from toolwire.domain import Completion, Message, ToolResult
from toolwire.errors import ProtocolError
from toolwire.protocols.execute import (
    execute_grammar,
    parse_execute,
    render_execute_instructions,
    render_results,
)
from toolwire.protocols.execute.scanner import EXEC_CLOSE_RE
from toolwire.tools.executor import ToolOutcome

__all__ = ["ExecuteAdapter"]


class ExecuteAdapter:
    transport = "execute"

    def __init__(self, setup: AgentSetup) -> None:
        self.setup = setup
        self.history: list[Message] = opening_messages(
            setup.pack,
            "execute",
            goal=setup.goal,
            protocol=render_execute_instructions(setup.tools.tools).rstrip("\n"),
        )
        self.grammar_tools: list[Any] | None = None
        self.require_call = False
        self.require_final = False

    def request(self) -> RequestParts:
        grammar = None
        if self.setup.use_grammar:
            grammar = execute_grammar(
                self.grammar_tools or self.setup.tools.tools,
                max_calls=self.setup.max_calls_per_turn,
                answer=self.require_final or not self.require_call,
            )
            if self.require_final:
                grammar = ending_only(grammar, "answer")
        return RequestParts(messages=list(self.history), grammar=grammar)

    def parse(self, completion: Completion) -> TurnParse:
        self._block_end: int | None = None
        try:
            parsed = parse_execute(
                completion.text,
                tools=self.setup.tools.schemas(),
                finish_reason=completion.finish_reason,
            )
        except ProtocolError as exc:
            return TurnParse(error=exc, rejected=refused_by_error(exc, "xml"))
        self._block_end = parsed.block_end
        turn = TurnParse(warnings=list(parsed.warnings))
        if parsed.calls:
            source = parsed.calls[0].source
            turn.calls, turn.rejected = split_over_limit(
                parsed.calls, self.setup.max_calls_per_turn, source
            )
            return turn
        answer = (parsed.answer or "").strip()
        if not answer:
            turn.error = protocol_error(
                AGENT_EMPTY_ANSWER,
                "Your reply had no <execute> block and no answer. Call tools in one "
                "<execute> block, or write the final answer as plain text.",
            )
            return turn
        settle_answer(
            turn, answer, self.setup, source="xml", finish_reason=completion.finish_reason
        )
        return turn

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None:
        # Keep exactly what the parser read: a `</execute>` inside a CDATA value or a
        # JSON string does not end the block (block_end is the parser's own end). A
        # reply the parser refused has no end: cut at the first close tag the wire
        # rules know, so results the model invented after it are not fed back as its own.
        end = self._block_end
        if end is None and (close := EXEC_CLOSE_RE.search(completion.text)):
            end = close.end()
        kept = completion.text[:end]
        self.history.append({"role": "assistant", "content": kept})
        results = [o.result for o in outcomes] + [
            ToolResult(r.call.id, r.call.tool, "failure", f"{r.code}: {r.detail}")
            for r in parsed.rejected
            if r.call is not None
        ]
        if results:
            self.history.append({"role": "user", "content": render_results(results)})
        if parsed.error is not None:
            text = render_repair(self.setup.pack, format_rejections([], parsed.error))
            self.history.append({"role": "user", "content": text})
