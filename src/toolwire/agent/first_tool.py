"""Two-step decoding of a run's first call: choose the tool in a short prompt, then fill it in.

Under a grammar, a small model's first call is mostly decided by the long
transport prompt's first tool (SmolLM2-135M lists ``.`` whatever the task).
Asked alone, in a few lines (the task, one line per tool, one example per
built-in tool) and constrained to the tool names, it picks a fitting tool far
more often (bench/RESULTS.md, "Agent tasks"). So the first model call of a
grammar run is two decodes: this side request chooses the tool, then the
transport's own request is sent with only that tool in its grammar, and the
model writes the call's arguments (paths still limited as
``agent.grammar_tools`` says). Both decodes count as one iteration.

Each decode is its own ``attempts`` row, so nothing the model wrote is lost and
no token is counted twice: the side request is kind ``first_tool`` with attempt
number ``SIDE_ATTEMPT`` (-1), before the turn's first try (0) and its repairs
(1..). Why -1 rather than shifting the turn's tries up by one: attempt 0 keeps
meaning "the transport's first request of the turn" in every run, grammar or
not, so per-attempt SQL and the request ids replay scripts see
(``{run}-001-0``) stay as they were, and ``ORDER BY turn, attempt`` is still
the order the requests were sent in.

The examples belong to the built-in tools (by ``implementation``), never to
a task: their words (pets.md, plan.md, music, Oslo) are chosen so that no
value in them can pass for one of a real task's. A tool without a built-in
example is listed with its description only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from toolwire.domain import Attempt, Completion, CompletionRequest
from toolwire.gbnf import gbnf_literal

__all__ = [
    "EXAMPLES",
    "FIRST_TOOL_KIND",
    "FIRST_TOOL_NOT_NAMED",
    "SIDE_ATTEMPT",
    "choice_attempt",
    "choice_request",
    "read_choice",
]

FIRST_TOOL_KIND: Final = "first_tool"  # attempts.kind of the side request
SIDE_ATTEMPT = -1  # its attempt number: before the turn's first try (0), see above
# The reply named no offered tool (cut at max_tokens, say): the transport's request then
# offers every tool, as without the side request.
FIRST_TOOL_NOT_NAMED = "FIRST_TOOL_NOT_NAMED"

# One worked example per built-in tool: (task, tool implementation).
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Save the word cat in pets.md.", "builtin:write_file"),
    ("What does plan.md say?", "builtin:read_file"),
    ("Which files are in the folder music?", "builtin:list_dir"),
    ("Which note mentions Oslo?", "builtin:search_text"),
)


def choice_request(
    tools: Sequence[Any], declared: Sequence[Any], goal: str, *, temperature: float
) -> CompletionRequest | None:
    """The side request that picks one of ``tools`` (grammar views) for ``goal``;
    None when there is nothing to choose. ``declared`` are the spec's tools (their
    ``implementation`` says which examples apply)."""
    names = [t.name for t in tools]
    if len(names) < 2:
        return None
    by_impl = {getattr(t, "implementation", ""): t.name for t in declared if t.name in names}
    lines = [f"{t.name}: {' '.join(str(t.description).split())}" for t in tools]
    examples = [
        f"Task: {task}\nTool: {by_impl[impl]}" for task, impl in EXAMPLES if impl in by_impl
    ]
    system = "Pick the tool for the task.\n" + "\n".join(lines)
    if examples:
        system += "\n\nExamples:\n" + "\n".join(examples)
    return CompletionRequest(
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": f"Task: {goal}\nTool:"},
        ],
        temperature=temperature,
        max_tokens=16,
        grammar="root ::= " + " | ".join(gbnf_literal(n) for n in names) + "\n",
        variables={},
        purpose=FIRST_TOOL_KIND,  # a replay answers it from its own lines (providers.replay)
    )


def read_choice(text: str, tools: Sequence[Any]) -> Any | None:
    """The chosen tool's view, or None when the answer names none."""
    name = text.strip()
    return next((t for t in tools if t.name == name), None)


def choice_attempt(
    *,
    turn: int,
    request_id: str,
    request: CompletionRequest,
    reply: Completion,
    raw_text: str,
    chosen: Any | None,
    started_at: float,
) -> Attempt:
    """The side request and its reply as the turn's ``first_tool`` attempt row;
    ``raw_text`` is the reply as the store keeps every reply (the loop's rendering)."""
    return Attempt(
        turn=turn,
        attempt=SIDE_ATTEMPT,
        kind=FIRST_TOOL_KIND,
        request_id=request_id,
        prompt=request.messages,
        raw_text=raw_text,
        parse_ok=chosen is not None,
        error_code=None if chosen is not None else FIRST_TOOL_NOT_NAMED,
        error_codes=(),
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        latency_ms=reply.latency_ms,
        finish_reason=reply.finish_reason,
        started_at=started_at,
    )
