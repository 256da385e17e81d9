"""The ``replay:`` provider: completions read from a JSONL script, returned in order.

A script is what ``RecordingProvider`` writes (or a hand-written cassette): one
JSON object per line, ``{"text", "finish_reason", "tool_calls"?, "input_tokens"?,
"output_tokens"?}``. Blank lines and ``//`` comment lines are skipped.

A line ``{"fault": KIND}`` injects a provider fault instead of a completion:
``timeout`` (``LLM_PROVIDER_TIMEOUT``, transient), ``transient`` (a 503),
``unreachable`` or ``error`` (a 400; both terminal). The call that reads it
raises, and the next call reads the next line, so ``[timeout, answer]`` is a
fault that one retry survives, in any process that replays the file.
``{{request_id}}``, ``{{nonce}}`` and any other key of ``request.variables``
are substituted at replay time, so one script serves runs with fresh ids.

A line with ``"for": "memory"`` answers the profile step after a run (seed 004's
insights JSON), ``"for": "first_tool"`` a grammar run's first-tool side request
(``agent.first_tool``), every other line a job's turn. Each kind of request reads only
its own lines, in order: a script without memory lines never loses a job line to
the profile step (which is then skipped), even when a batch shares the script.

``"sent": {"constraint": "grammar"|"json_schema"|null, "native_tools": bool}``
(written by ``--record``) says how the recorded run's requests were shaped. The
replay then says it takes what the recorded provider took (``supports_grammar``,
``supports_json_schema``, ``carries_native_tools``), so the run takes the same
steps: a grammar run sends its side requests again, and a native run whose tools
went in the prompt reads its calls from the text again. The grammar itself is
ignored (nothing is sampled). A script without ``sent`` replays unconstrained.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.domain import Completion, CompletionRequest, ToolCall
from toolwire.errors import (
    LLM_PROVIDER_ERROR,
    LLM_PROVIDER_TRANSIENT,
    REPLAY_EXHAUSTED,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
    UsageError,
)

__all__ = ["ReplayProvider", "ScriptedCompletion", "load_script", "substitute_variables"]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_KEYS = frozenset(
    {"text", "finish_reason", "tool_calls", "input_tokens", "output_tokens", "for", "sent"}
)
PURPOSES: tuple[str, ...] = ("job", "memory", "first_tool")  # CompletionRequest.purpose
CONSTRAINTS: tuple[str | None, ...] = ("grammar", "json_schema", None)
_TOOL_CALL_KEYS = frozenset({"id", "name", "arguments"})


def _fault(kind: str) -> ProviderError:
    """The provider error a ``{"fault": kind}`` line raises, as a real endpoint would."""
    if kind == "timeout":
        return ProviderTimeout("replayed fault: no answer within the timeout (model.timeout_s)")
    if kind == "unreachable":
        return ProviderUnreachable("replayed fault: cannot reach the model server")
    if kind == "transient":
        return ProviderError(
            "replayed fault: the server answered 503 (transient)",
            code=LLM_PROVIDER_TRANSIENT,
            transient=True,
            status_code=503,
        )
    return ProviderError(
        "replayed fault: the server answered 400",
        code=LLM_PROVIDER_ERROR,
        transient=False,
        status_code=400,
    )


FAULT_KINDS: tuple[str, ...] = ("timeout", "transient", "unreachable", "error")


@dataclass(frozen=True, slots=True)
class ScriptedCompletion:
    """One script line, before placeholders are filled in."""

    text: str
    finish_reason: str
    tool_calls: tuple[tuple[str, str, dict[str, Any]], ...]  # (id, name, arguments)
    input_tokens: int | None
    output_tokens: int | None
    fault: str | None = None  # a FAULT_KINDS entry: raise instead of answering
    purpose: str = "job"  # which requests this line answers (PURPOSES)
    sent: tuple[str | None, bool] | None = None  # (constraint, native tools) when recorded


def substitute_variables(value: Any, variables: Mapping[str, str]) -> Any:
    """Fill ``{{key}}`` placeholders in a string, or in every string inside lists/dicts.

    One pass: a substituted value is never scanned again, and placeholders whose
    key is not in ``variables`` are left as written.
    """
    if isinstance(value, str):
        if not variables or "{{" not in value:
            return value
        return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [substitute_variables(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute_variables(v, variables) for k, v in value.items()}
    return value


def load_script(path: Path) -> list[ScriptedCompletion]:
    """Read and validate a replay script; UsageError names ``file:line`` on any fault."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"replay script {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read replay script {path}: {exc}") from None
    script: list[ScriptedCompletion] = []
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        script.append(_parse_record(record, where))
    return script


def _parse_record(record: Any, where: str) -> ScriptedCompletion:
    if not isinstance(record, dict):
        raise UsageError(f"{where}: each line must be a JSON object, got {type(record).__name__}")
    if "fault" in record:
        kind = record["fault"]
        if set(record) != {"fault"} or kind not in FAULT_KINDS:
            raise UsageError(
                f'{where}: a fault line is {{"fault": KIND}} alone, KIND one of '
                f"{', '.join(FAULT_KINDS)}"
            )
        return ScriptedCompletion("", "stop", (), None, None, fault=kind)
    unknown = sorted(set(record) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown keys {unknown}; allowed: {sorted(_KEYS)}")
    text = record.get("text", "")
    finish_reason = record.get("finish_reason", "stop")
    if not isinstance(text, str):
        raise UsageError(f"{where}: 'text' must be a string")
    if not isinstance(finish_reason, str) or not finish_reason:
        raise UsageError(f"{where}: 'finish_reason' must be a non-empty string")
    tokens: list[int | None] = []
    for key in ("input_tokens", "output_tokens"):
        value = record.get(key)
        # bool is an int subclass; a true/false token count is a typo, not a count.
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{where}: '{key}' must be an integer or null")
        tokens.append(value)
    raw_calls = record.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise UsageError(f"{where}: 'tool_calls' must be a list")
    calls = tuple(_parse_tool_call(c, f"{where}: tool_calls[{i}]") for i, c in enumerate(raw_calls))
    if not text and not calls:
        raise UsageError(f"{where}: a completion needs 'text' or 'tool_calls'")
    purpose = record.get("for", "job")
    if purpose not in PURPOSES:
        raise UsageError(f"{where}: 'for' must be one of {', '.join(PURPOSES)}")
    return ScriptedCompletion(
        text,
        finish_reason,
        calls,
        tokens[0],
        tokens[1],
        purpose=purpose,
        sent=_parse_sent(record.get("sent"), where),
    )


def _parse_sent(sent: Any, where: str) -> tuple[str | None, bool] | None:
    if sent is None:
        return None
    if (
        not isinstance(sent, dict)
        or set(sent) != {"constraint", "native_tools"}
        or sent["constraint"] not in CONSTRAINTS
        or not isinstance(sent["native_tools"], bool)
    ):
        raise UsageError(
            f'{where}: \'sent\' is {{"constraint": "grammar"|"json_schema"|null, '
            '"native_tools": true|false}'
        )
    return sent["constraint"], sent["native_tools"]


def _parse_tool_call(call: Any, where: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(call, dict):
        raise UsageError(f"{where} must be an object")
    unknown = sorted(set(call) - _TOOL_CALL_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown keys {unknown}; allowed: {sorted(_TOOL_CALL_KEYS)}")
    call_id, name, args = call.get("id"), call.get("name"), call.get("arguments", {})
    if not isinstance(call_id, str) or not call_id:
        raise UsageError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: 'name' must be a non-empty string")
    if isinstance(args, str):  # the OpenAI wire shape: arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: 'arguments' string is not valid JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise UsageError(f"{where}: 'arguments' must be a JSON object")
    return call_id, name, args


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class ReplayProvider:
    """Returns a script's completions in order; the grammar is ignored (nothing is sampled).

    Job requests and memory requests each read their own lines (``"for"``), in order.
    """

    def __init__(self, path: Path, *, name: str | None = None) -> None:
        self.path = path
        self.name = name or f"replay:{path}"
        self._script = load_script(path)
        # What the recorded run's requests carried (the module docstring: "sent").
        sent = [s.sent for s in self._script if s.sent is not None and s.purpose == "job"]
        self.supports_grammar = bool(sent) and sent[0][0] == "grammar"
        self.supports_json_schema = bool(sent) and sent[0][0] == "json_schema"
        self.carries_native_tools: bool | None = any(s[1] for s in sent) if sent else None
        self._lines = {
            purpose: [item for item in self._script if item.purpose == purpose]
            for purpose in PURPOSES
        }
        self._next = dict.fromkeys(PURPOSES, 0)
        self._lock = threading.Lock()  # batch flows may share one provider across threads

    @property
    def remaining(self) -> int:
        """How many completions are left to replay."""
        return len(self._script) - sum(self._next.values())

    def remaining_for(self, purpose: str) -> int:
        """How many lines are left for requests of ``purpose`` ("job" or "memory")."""
        return len(self._lines.get(purpose, ())) - self._next.get(purpose, 0)

    def refusal(self, request: CompletionRequest) -> str | None:
        """Why this script cannot answer ``request`` (None if it can): a memory request
        with no memory line left is not worth asking (it must not take a job line)."""
        if request.purpose == "memory" and self.remaining_for("memory") <= 0:
            return f'the replay script {self.path.name} has no line marked "for": "memory"'
        return None

    def complete(self, request: CompletionRequest) -> Completion:
        purpose = request.purpose if request.purpose in PURPOSES else "job"
        with self._lock:
            lines, n = self._lines[purpose], self._next[purpose]
            if n >= len(lines):
                which = "" if purpose == "job" else f' marked "for": "{purpose}"'
                raise ProviderError(
                    f"replay script {self.path} has {len(lines)} completions{which}; "
                    f"the run asked for the {_ordinal(len(lines) + 1)}",
                    code=REPLAY_EXHAUSTED,
                    transient=False,
                )
            item = lines[n]
            self._next[purpose] = n + 1
        if item.fault is not None:
            raise _fault(item.fault)
        variables = request.variables
        calls = tuple(
            ToolCall(id=call_id, tool=name, args=substitute_variables(args, variables))
            for call_id, name, args in item.tool_calls
        )
        return Completion(
            text=substitute_variables(item.text, variables),
            finish_reason=item.finish_reason,
            tool_calls=calls,
            input_tokens=item.input_tokens,
            output_tokens=item.output_tokens,
            latency_ms=0.0,
            model=self.name,
        )

    def close(self) -> None:
        """Nothing to release: the script is read once, at construction."""
