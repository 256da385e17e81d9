"""Pure prompt builders (seed 004): state -> prompt text, state -> chat messages.

Functions of their arguments only: they read the state, never change it, and
the same state gives the same text (no clocks, no randomness; message
timestamps are dropped). Budgets are tokens counted with ``count_tokens``
(the model's tokenizer via ``tokens.token_counter(provider)``, or the byte
estimate), and text is cut at line or word boundaries, never mid-word.

Mode instructions follow the seed: ``deep`` asks for reflect/analyse/
strategise, ``fast`` (and ``adapt``, which starts fast) asks for direct action;
the reply's ``switch_mode`` lets the model change mode for the next iteration
(``state.apply_reasoning_update``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.memory.profiles import user_context
from toolwire.memory.state import AgentState, ReasoningContext
from toolwire.memory.tokens import TokenCounter, estimate_tokens, truncate_to_tokens

__all__ = [
    "MODE_INSTRUCTIONS",
    "RESPONSE_FORMAT",
    "build_messages",
    "build_prompt",
    "compress_context",
]

MODE_INSTRUCTIONS: dict[str, str] = {
    "deep": (
        "DEEP MODE: Structured reasoning required\n"
        "- REFLECT: What have I learned? What worked/failed? What gaps remain?\n"
        "- ANALYZE: What are the core problems or strategic considerations?\n"
        "- STRATEGIZE: What's my multi-step plan? What tools will I use and why?\n"
        '- Set "switch_mode": "fast" once the plan is clear'
    ),
    "fast": (
        "FAST MODE: Direct execution\n"
        "- Review context above\n"
        "- Choose appropriate tools and act efficiently\n"
        '- ESCALATE to deep mode ("switch_mode": "deep") if the task proves complex'
    ),
}
MODE_INSTRUCTIONS["adapt"] = MODE_INSTRUCTIONS["fast"]  # seed: anything but deep runs fast

RESPONSE_FORMAT = """Respond with JSON:
{
    "thinking": "Your reasoning for this step",
    "tool_calls": [
        {"name": "tool_name", "args": {"param": "value"}}
    ],
    "context_updates": {
        "goal": "refined goal if needed",
        "strategy": "current approach",
        "insights": ["new insight if discovered"]
    },
    "response": "direct response if ready to answer user",
    "switch_mode": "fast|deep"
}"""

# Seed 004's selection: recent facts, insights and results, the last thought.
RECENT_FACTS = 5
RECENT_INSIGHTS = 3
RECENT_RESULTS = 3
LAST_THOUGHT_TOKENS = 50  # the seed's 200 characters, in tokens


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def compress_context(
    reasoning: ReasoningContext,
    max_tokens: int = 1000,
    count_tokens: TokenCounter = estimate_tokens,
) -> str:
    """The reasoning context as GOAL/STRATEGY/FACTS/INSIGHTS/LAST THINKING lines, in budget."""
    sections = []
    if reasoning.goal:
        sections.append(f"GOAL: {reasoning.goal}")
    if reasoning.strategy:
        sections.append(f"STRATEGY: {reasoning.strategy}")
    if reasoning.facts:
        recent = list(reasoning.facts.items())[-RECENT_FACTS:]
        sections.append("FACTS: " + "; ".join(f"{k}: {_value(v)}" for k, v in recent))
    if reasoning.insights:
        sections.append("INSIGHTS: " + "; ".join(reasoning.insights[-RECENT_INSIGHTS:]))
    if reasoning.thoughts:
        thinking = str(reasoning.thoughts[-1].get("thinking", "")).replace("\n", " ")
        thinking = truncate_to_tokens(thinking, LAST_THOUGHT_TOKENS, count_tokens)
        if thinking:
            sections.append(f"LAST THINKING: {thinking}")
    return truncate_to_tokens("\n".join(sections), max_tokens, count_tokens)


def _tool_line(tool: Any) -> str:
    """``- name: description`` from an object with name/description, a dict, or a pair."""
    if isinstance(tool, Mapping):
        name, description = tool.get("name", "?"), tool.get("description", "")
    elif isinstance(tool, tuple) and len(tool) == 2:
        name, description = tool
    else:
        name, description = getattr(tool, "name", str(tool)), getattr(tool, "description", "")
    return f"- {name}: {description}".rstrip(": ")


def _results_block(completed: Sequence[Mapping[str, Any]]) -> str:
    if not completed:
        return ""
    lines = []
    for result in completed[-RECENT_RESULTS:]:
        mark = "✓" if result.get("success", False) else "✗"
        lines.append(f"{mark} {result.get('name', 'unknown')}")
    return "RECENT RESULTS:\n" + "\n".join(lines) + "\n\n"


def build_prompt(
    state: AgentState,
    tools: Sequence[Any] = (),
    *,
    mode: str | None = None,
    context_tokens: int = 1000,
    user_tokens: int = 200,
    count_tokens: TokenCounter = estimate_tokens,
) -> str:
    """Seed 004's reasoning prompt: user context, reasoning context, results, tools, mode."""
    mode = mode or state.execution.mode
    situated = user_context(state.user_profile, max_tokens=user_tokens, count_tokens=count_tokens)
    reasoning = compress_context(state.reasoning, context_tokens, count_tokens)
    tool_registry = "\n".join(_tool_line(t) for t in tools) or "(no tools)"
    instructions = MODE_INSTRUCTIONS.get(mode, MODE_INSTRUCTIONS["fast"])
    execution = state.execution
    return (
        (f"{situated}\n\n" if situated else "")
        + f"REASONING CONTEXT:\n{reasoning}\n\n"
        + _results_block(execution.completed_calls)
        + f"AVAILABLE TOOLS:\n{tool_registry}\n\n"
        + f"{instructions}\n\n"
        + f"Iteration {execution.iteration}/{execution.max_iterations}\n\n"
        + RESPONSE_FORMAT
    )


def build_messages(
    state: AgentState,
    tools: Sequence[Any] = (),
    *,
    max_tokens: int | None = None,
    count_tokens: TokenCounter = estimate_tokens,
    **prompt_options: Any,
) -> list[dict[str, str]]:
    """System prompt (``build_prompt``) + the conversation as role/content dicts.

    With ``max_tokens``, whole messages are dropped oldest-first (the first
    message, the user's query, is always kept) until everything fits; message
    boundaries are the cut points, so no message is sent half.
    """
    system = {
        "role": "system",
        "content": build_prompt(state, tools, count_tokens=count_tokens, **prompt_options),
    }
    conversation = [
        {"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
        for m in state.execution.messages
    ]
    if max_tokens is None or len(conversation) <= 1:
        return [system, *conversation]
    first, rest = conversation[0], conversation[1:]
    used = count_tokens(system["content"]) + count_tokens(first["content"])
    kept: list[dict[str, str]] = []
    for message in reversed(rest):
        cost = count_tokens(message["content"])
        if used + cost > max_tokens:
            break
        kept.append(message)
        used += cost
    return [system, first, *reversed(kept)]
