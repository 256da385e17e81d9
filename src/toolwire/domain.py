"""The internal model every wire format translates to and from.

Plain frozen dataclasses: they are built on the hot path (every turn, every
operation) and pydantic validation there would be cost without benefit; the
untrusted input is the model's text, and the protocol parsers own that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Message = dict[str, Any]  # {"role": ..., "content": ...} (+ tool_calls / tool_call_id)

OPERATION_KINDS: tuple[str, ...] = (
    "create_note",
    "rewrite_note",
    "retitle_note",
    "relink_note",
    "retag_note",
    "defer",
)
# Operations toolwire plans itself (``reorganize:`` in the spec), never a model: not in
# OPERATION_KINDS, so no protocol, grammar or allowed_kinds ever offers them to one.
REORGANIZE_KINDS: tuple[str, ...] = ("relate_note", "index_topic")
RESPONSE_STATUSES: tuple[str, ...] = ("ok", "needs_clarification", "rejected")
TRANSPORTS: tuple[str, ...] = ("native", "xml", "xml-final", "xml_attrless", "execute", "xct")


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    tool: str
    args: dict[str, Any]
    source: Literal["native", "xml", "json", "leaked"] = "native"  # leaked: written as text
    slot: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    tool: str
    status: Literal["success", "failure"]
    content: Any
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class FinalReport:
    status: Literal["success", "failure", "partial"]
    format: str
    content: Any
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AnswerSlot:
    """A part of an answer the model writes, constrained by a GBNF rule body."""

    name: str
    gbnf: str  # one rule's body: literals, classes and repetition, no rule references
    max_tokens: int
    # The literal that closes the slot ("</title>"): part of the slot's grammar, so the
    # model ends the slot when it chooses to, not at max_tokens.
    end: str = ""


# An answer known in advance but for its slots: literal text and AnswerSlots, in order.
AnswerTemplate = tuple[str | AnswerSlot, ...]


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What the engine asks of a provider for one attempt."""

    messages: list[Message]
    temperature: float = 0.0
    max_tokens: int = 512
    grammar: str | None = None  # GBNF text, when the spec asks for constrained decoding
    # The answer with its slots (librarian.answer); providers that fill templates decode
    # only the slots, the others receive ``grammar`` (the same template as GBNF).
    template: AnswerTemplate | None = None
    tools: list[dict[str, Any]] | None = None  # native tool definitions (OpenAI shape)
    # The JSON Schema of the reply (its "title" names it), when the run is constrained by
    # schema rather than grammar (providers.structured): servers that take one get it.
    json_schema: dict[str, Any] | None = None
    # Native tools constrained too: OpenAI gets strict function parameters where they qualify.
    strict_tools: bool = False
    # With tools: "auto" (seed 001: the model may call tools or answer), sent where the
    # API takes it (providers.openai_compat) and recorded with the run.
    tool_choice: str | None = None
    # Values a replay script may reference as {{request_id}} / {{nonce}}.
    variables: dict[str, str] = field(default_factory=dict)
    # Who asks: the job's own turns ("job") or the profile step after the run ("memory").
    # A replay script answers each from its own lines, so one never eats the other's.
    purpose: str = "job"


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish_reason: str = "stop"
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = 0.0
    model: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    """One librarian operation as the model proposed it (seed 002)."""

    operation_id: str
    kind: str
    target_note_id: str | None
    target_path: str | None
    title: str
    body_markdown: str
    reason: str
    confidence: float

    @property
    def target(self) -> str:
        return self.target_note_id or self.target_path or ""


_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])(?:\s+|$)")


def parse_topics(body_markdown: str) -> list[str]:
    """Topics of a retag body: one per line, bullets/numbering and commas tolerated, deduped.

    Here, beside :class:`Operation`, because the librarian and the profile synthesis both
    read retag bodies, and the memory layer sits below the librarian."""
    topics: list[str] = []
    for line in body_markdown.splitlines():
        for piece in line.split(","):
            topic = _BULLET.sub("", piece.strip()).strip()
            if topic and topic not in topics:
                topics.append(topic)
    return topics


@dataclass(frozen=True, slots=True)
class LibrarianResponse:
    request_id: str
    status: str
    summary: str
    operations: tuple[Operation, ...]
    warnings: tuple[str, ...]
    # Tolerated deviations (leading <think>, code fence, unknown tags): recorded, not fatal.
    parse_warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Attempt:
    """One model call and what became of its text; every one is stored."""

    turn: int
    # 0 = first try, 1.. = repairs; -1 = the first-tool side request that comes before
    # the turn's first try (agent.first_tool.SIDE_ATTEMPT says why -1)
    attempt: int
    kind: Literal["initial", "repair", "first_tool"]
    request_id: str
    prompt: list[Message]
    raw_text: str
    parse_ok: bool
    error_code: str | None
    error_codes: tuple[str, ...]
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float
    finish_reason: str
    started_at: float  # unix seconds


@dataclass(frozen=True, slots=True)
class OperationOutcome:
    """What validation and apply made of one proposed operation."""

    turn: int
    seq: int
    operation: Operation
    status: Literal["applied", "rejected", "deferred", "planned"]
    code: str | None = None  # rejection code, e.g. MAX_OPERATIONS_EXCEEDED
    detail: str | None = None  # human-readable reason
    path: str | None = None  # workspace-relative file the operation touches
    before_sha256: str | None = None
    after_sha256: str | None = None
