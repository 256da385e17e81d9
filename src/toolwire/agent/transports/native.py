"""The ``native`` adapter: provider tool definitions out, provider tool calls back.

The run ends with the ``agent__final_report`` tool, or with a turn that
answers in text and calls nothing (what most chat models do when they are
done). A text answer holding tool calls written as text (``<tool_call>``,
``<invoke>``, ...) is not an answer: those calls are recovered and run
(``leaked``). An answer cut by the output limit is kept marked truncated, or
refused for the json and slack-block-kit formats (seed 001's rule for FINAL).
Every tool call id gets a ``tool`` message before the next turn, the refused
ones included, so the provider's history stays well formed and the
model learns why a call did not run.

For a model that takes no tool definitions (``setup.tools_in_prompt``, see
``prompt_tools``), the definitions are written into the system prompt and
the calls come back as ``<tool_call>`` text, read the same way.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from toolwire.agent.pack import opening_messages, render_repair
from toolwire.agent.transports.base import (
    AGENT_EMPTY_ANSWER,
    FINAL_REPORT_TOOL,
    AgentSetup,
    Rejected,
    RequestParts,
    TurnParse,
    args_size,
    format_rejections,
    protocol_error,
    result_payload,
    settle_answer,
    split_over_limit,
)
from toolwire.agent.transports.leaked import leaked_turn, render_leaked_results
from toolwire.agent.transports.progress import (
    PROGRESS_NOTED,
    PROGRESS_TOOL,
    progress_definition,
    take_progress,
)
from toolwire.agent.transports.prompt_tools import render_prompt_tools
from toolwire.domain import Completion, Message
from toolwire.protocols.native import (
    assistant_message,
    find_leaked_calls,
    parse_native,
    tool_call_grammar,
    tool_definitions,
    tool_message,
)
from toolwire.tools.executor import ToolOutcome

__all__ = ["NativeAdapter", "native_tool_messages"]


class NativeAdapter:
    transport = "native"

    def __init__(self, setup: AgentSetup) -> None:
        self.setup = setup
        self.history: list[Message] = opening_messages(
            setup.pack, "native", goal=setup.goal, protocol=""
        )
        self.definitions = tool_definitions(setup.tools.tools, final_format=setup.final_format)
        if not setup.tools_in_prompt:
            self.definitions.append(progress_definition())
        self._leaked = False  # the last turn's calls were written as text
        self.grammar_tools: list[Any] | None = None
        self.require_call = False
        self.require_final = False
        if setup.tools_in_prompt:
            finish = (
                "When the task is done, call agent__final_report alone, or answer in plain "
                "text without a tool_call: a short report of what you did."
            )
            section = render_prompt_tools(self.definitions, finish=finish)
            first = self.history[0]
            self.history[0] = {**first, "content": f"{first['content']}\n\n{section}"}

    def request(self) -> RequestParts:
        # No grammar: a native tool call's shape is the provider's business (constrained
        # by schema, OpenAI gets strict parameters: CompletionRequest.strict_tools).
        if self.setup.tools_in_prompt:
            grammar = None
            if self.setup.use_grammar:  # <tool_call> text shaped by the schemas, or an answer
                # The last call: the final-report tool or a plain answer, nothing else.
                shaped = [] if self.require_final else self.grammar_tools or self.setup.tools.tools
                # Until a tool ran, calls only: the final-report tool is an ending too.
                calls_only = self.require_call and not self.require_final
                grammar = tool_call_grammar(
                    shaped if calls_only else _with_final(shaped, self.definitions),
                    max_calls=self.setup.max_calls_per_turn,
                    ending=self.require_final or not self.require_call,
                )
            return RequestParts(messages=list(self.history), grammar=grammar)
        return RequestParts(messages=list(self.history), tools=self.definitions)

    def parse(self, completion: Completion) -> TurnParse:
        native = parse_native(completion)
        self._leaked = False
        if native.answered and "<" in completion.text:
            scan = find_leaked_calls(completion.text)
            if scan.found:
                self._leaked = True
                return leaked_turn(completion, scan, self.setup)
        work, progress = take_progress(native.calls)
        calls, refused = split_over_limit(work, self.setup.max_calls_per_turn, source="native")
        turn = TurnParse(calls=calls, progress=progress)
        turn.rejected = [
            Rejected(
                item.code,
                item.detail,
                "native",
                tool=item.call.tool,
                args_bytes=args_size(item.call.args),
                call=item.call,
            )
            for item in native.invalid
        ] + refused
        payload, status = None, "success"
        if native.final is not None:
            payload, status = native.final.payload, native.final.status
        elif native.answered:
            if not completion.text.strip():
                turn.error = protocol_error(
                    AGENT_EMPTY_ANSWER,
                    "The answer was empty. Call a tool, or call agent__final_report to finish.",
                )
                return turn
            payload = completion.text
        if payload is not None:
            # A final-report tool call is complete JSON whatever the stop reason; only
            # a text answer can be cut.
            reason = "stop" if native.final is not None else completion.finish_reason
            settle_answer(
                turn, payload, self.setup, source="native", finish_reason=reason, status=status
            )
        return turn

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None:
        self.history.append(assistant_message(completion.text, completion.tool_calls))
        if self._leaked:  # no tool-call ids to answer: the results go back as text
            text = render_leaked_results(parsed, outcomes, in_prompt=self.setup.tools_in_prompt)
            self.history.append({"role": "user", "content": text})
            return
        self.history += native_tool_messages(completion, parsed, outcomes)
        if parsed.error is not None and not completion.tool_calls:
            self.history.append(
                {"role": "user", "content": render_repair(self.setup.pack, _errors(parsed))}
            )


def native_tool_messages(
    completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
) -> list[Message]:
    """One ``tool`` message per native call id, in call order: result, refusal or error."""
    answers: dict[str, deque[str]] = defaultdict(deque)
    for outcome in outcomes:
        text = result_payload(outcome)
        answers[outcome.call.id].append(text if outcome.status == "success" else f"error: {text}")
    for item in parsed.rejected:
        if item.call is not None:
            answers[item.call.id].append(f"error: {item.code}: {item.detail}")
    messages = []
    for call in completion.tool_calls:
        queue = answers.get(call.id)
        if queue:
            text = queue.popleft()
        elif call.tool == PROGRESS_TOOL:
            text = PROGRESS_NOTED
        elif parsed.error is not None and parsed.final_source == "native":
            text = f"error: {format_rejections([], parsed.error)}"  # the refused final report
        else:
            text = "final report received"
        messages.append(tool_message(call.id, text))
    return messages


def _with_final(tools: Sequence[Any], definitions: Sequence[dict[str, Any]]) -> list[Any]:
    """The tools plus the final-report tool, as the grammar builders read them."""
    final = [
        SimpleNamespace(name=d["function"]["name"], args=d["function"]["parameters"])
        for d in definitions
        if d["function"]["name"] == FINAL_REPORT_TOOL
    ]
    return [*tools, *final]


def _errors(parsed: TurnParse) -> str:
    return format_rejections(parsed.rejected, parsed.error)
