"""The ``xml`` and ``xml-final`` adapters (seed 001): nonce, slots, XML-NEXT, XML-PAST.

``xml``: the provider sees no tools; each request ends with an ephemeral
XML-NEXT (fresh slots, numbered across model calls so an old slot is never
valid again) and the history keeps one XML-PAST per turn with that turn's
results and the tags that did not run. ``xml-final``: tools stay native
(definitions sent, ``tool`` messages back), only the final report is an XML
tag, XML-PAST is suppressed; other XML tags are refused and reported.

``xml-final`` for a model that takes no tool definitions
(``setup.tools_in_prompt``): the definitions go into the system prompt, the
calls come back as ``<tool_call>`` text (``prompt_tools``) and their results
as a user message; the final report is still the FINAL tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.agent.final_report import process_final_report
from toolwire.agent.pack import opening_messages, render_repair
from toolwire.agent.transports.base import (
    AgentSetup,
    Rejected,
    RequestParts,
    TurnParse,
    args_size,
    ending_only,
    format_rejections,
    split_over_limit,
)
from toolwire.agent.transports.leaked import leaked_turn, render_leaked_results
from toolwire.agent.transports.native import native_tool_messages
from toolwire.agent.transports.progress import progress_definition, take_progress
from toolwire.agent.transports.prompt_tools import render_prompt_tools
from toolwire.domain import Completion, Message
from toolwire.errors import ProtocolError
from toolwire.protocols.native import (
    assistant_message,
    find_leaked_calls,
    parse_native,
    tool_call_grammar,
    tool_definitions,
)
from toolwire.protocols.slots import (
    InvalidTag,
    new_nonce,
    parse_slots,
    render_invalid_tags,
    render_xml_next,
    render_xml_past,
    slot_ids,
    slots_grammar,
)
from toolwire.tools.executor import ToolOutcome

__all__ = ["NATIVE_CALL_IGNORED", "SlotsAdapter"]

NATIVE_CALL_IGNORED = "NATIVE_CALL_IGNORED"  # a provider tool call in xml mode (seed: ignored)
# XML-NEXT's xml-final line, and what it says when the tools travel in the prompt.
_NATIVE_LINE = "with native tool calls, never as XML tags."
_PROMPT_LINE = "with <tool_call> elements as the system message shows, never as slot tags."


class SlotsAdapter:
    def __init__(self, setup: AgentSetup, *, nonce: str | None = None) -> None:
        self.setup = setup
        self.transport = setup.transport
        self.mode = "xml-final" if setup.transport == "xml-final" else "xml"
        self.nonce = nonce or new_nonce()
        self.history: list[Message] = opening_messages(
            setup.pack, setup.transport, goal=setup.goal, protocol=""
        )
        self.next_slot = 1
        self.slots: list[str] = []
        self._invalid: list[InvalidTag] = []
        self.native_defs = (
            tool_definitions(setup.tools.tools, final_format=None)
            if self.mode == "xml-final"
            else None
        )
        if self.native_defs is not None and not setup.tools_in_prompt:
            self.native_defs.append(progress_definition())  # seed 001: progress goes native
        self.in_prompt = self.mode == "xml-final" and setup.tools_in_prompt
        self.grammar_tools: list[Any] | None = None
        self.require_call = False
        self.require_final = False
        if self.in_prompt and self.native_defs:
            finish = "When the task is done, write the FINAL tag as the latest XML-NEXT shows."
            section = render_prompt_tools(self.native_defs, finish=finish)
            first = self.history[0]
            self.history[0] = {**first, "content": f"{first['content']}\n\n{section}"}

    def request(self) -> RequestParts:
        if self.mode == "xml":
            self.slots = slot_ids(self.nonce, self.next_slot, self.setup.max_calls_per_turn)
        xml_next = render_xml_next(
            nonce=self.nonce,
            tools=self.setup.tools.tools,
            slots=self.slots,
            final_format=self.setup.final_format,
            mode=self.mode,  # type: ignore[arg-type]
            final_schema=self.setup.final_schema,
        )
        grammar = None
        shaped = self.grammar_tools or self.setup.tools.tools
        if self.setup.use_grammar and self.mode == "xml":
            grammar = slots_grammar(
                nonce=self.nonce,
                slots=self.slots,
                tools=shaped,
                final_format=self.setup.final_format,
                allow_final=self.require_final or not self.require_call,
            )
            if self.require_final:
                grammar = ending_only(grammar, "final")
        if self.in_prompt:  # the tools are in the system prompt, called as <tool_call> text
            xml_next = xml_next.replace(_NATIVE_LINE, _PROMPT_LINE)
            if self.setup.use_grammar:
                grammar = tool_call_grammar(
                    [] if self.require_final else shaped,
                    max_calls=self.setup.max_calls_per_turn,
                    final_nonce=self.nonce,
                    final_format=self.setup.final_format,
                    ending=self.require_final or not self.require_call,
                )
        return RequestParts(
            messages=[*self.history, {"role": "user", "content": xml_next}],
            tools=None if self.in_prompt else self.native_defs,
            grammar=grammar,
            variables={"nonce": self.nonce},
        )

    def parse(self, completion: Completion) -> TurnParse:
        parsed = parse_slots(
            completion.text,
            nonce=self.nonce,
            allowed_tools=list(self.setup.tools),
            slots=self.slots,
            mode=self.mode,  # type: ignore[arg-type]
            finish_reason=completion.finish_reason,
        )
        self._invalid = list(parsed.invalid)
        turn = TurnParse(progress=parsed.progress)
        if self.in_prompt:
            scan = find_leaked_calls(completion.text)
            if scan.found:
                calls = leaked_turn(completion, scan, self.setup)
                turn.calls, turn.rejected = calls.calls, calls.rejected
                turn.recorded += calls.recorded
        elif self.mode == "xml-final":
            native = parse_native(completion, final_tool=False)
            work, progress = take_progress(native.calls)
            turn.progress = progress or turn.progress
            turn.calls, refused = split_over_limit(work, self.setup.max_calls_per_turn, "native")
            turn.rejected += [
                Rejected(
                    i.code,
                    i.detail,
                    "native",
                    tool=i.call.tool,
                    args_bytes=args_size(i.call.args),
                    call=i.call,
                )
                for i in native.invalid
            ] + refused
        else:
            turn.calls = list(parsed.calls)
            turn.rejected += [
                Rejected(
                    NATIVE_CALL_IGNORED,
                    "xml mode runs no native tool calls: write slot tags",
                    "native",
                    tool=call.tool,
                    args_bytes=args_size(call.args),
                )
                for call in completion.tool_calls
            ]
        turn.rejected += [
            Rejected(
                tag.code,
                tag.detail,
                "xml",
                tool=tag.tool,
                slot=tag.slot,
                args_bytes=tag.content_bytes,
            )
            for tag in parsed.invalid
        ]
        if parsed.final is not None:
            turn.final_source = "xml"
            turn.final_slot = parsed.final.slot or None
            turn.final_bytes = len(parsed.final.raw_payload.encode("utf-8", "surrogatepass"))
            try:
                turn.final = process_final_report(
                    parsed.final,
                    expected_format=self.setup.final_format,
                    schema=self.setup.final_schema,
                )
            except ProtocolError as exc:
                turn.error = exc
        return turn

    def record(
        self, completion: Completion, parsed: TurnParse, outcomes: Sequence[ToolOutcome]
    ) -> None:
        self.next_slot += len(self.slots)
        parts: list[str] = []
        if self.mode == "xml":
            self.history.append({"role": "assistant", "content": completion.text})
            past = render_xml_past([(o.call, o.result) for o in outcomes], invalid=self._invalid)
            if past:
                parts.append(past.rstrip("\n"))
        elif self.in_prompt:
            self.history.append({"role": "assistant", "content": completion.text})
            if outcomes or parsed.rejected:
                parts.append(render_leaked_results(parsed, outcomes, in_prompt=True).rstrip())
            bad = render_invalid_tags(self._invalid)
            if bad:
                parts.append(bad.rstrip("\n"))
        else:
            self.history.append(assistant_message(completion.text, completion.tool_calls))
            self.history += native_tool_messages(completion, parsed, outcomes)
            bad = render_invalid_tags(self._invalid)
            if bad:
                parts.append(bad.rstrip("\n"))
        ignored = [r for r in parsed.rejected if r.code == NATIVE_CALL_IGNORED]
        if parsed.error is not None or ignored:
            parts.append(render_repair(self.setup.pack, format_rejections(ignored, parsed.error)))
        if parts:
            self.history.append({"role": "user", "content": "\n\n".join(parts)})
