"""Record a real run as a replay script (``toolwire run --record PATH``).

``RecordingProvider`` wraps any provider and appends each completion to a JSONL
file in the ``replay:`` format, with the request's ids turned back into
``{{request_id}}`` / ``{{nonce}}`` placeholders so the script replays under
fresh ids. Only the completion is written, never the request: no prompts, no
headers, no keys; but how the request was shaped is (``sent``: its constraint and
whether tool definitions went with it), and whose it was (``for``: a first-tool
side request, the profile step), so a replay takes the same steps, attempt for
attempt (issue 46: a side reply fed to the main request made a repair the real run
never had). The file is pure JSON Lines (no comment header), so ``jq``
and other JSON tools read it as is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolwire.domain import Completion, CompletionRequest
from toolwire.providers.base import Provider, refusal

__all__ = ["RecordingProvider", "completion_to_record"]

# The variables that are fresh per run; other variables are left alone, since a
# short value ("1", "ok") would otherwise be replaced all over the text.
DEFAULT_PLACEHOLDERS: tuple[str, ...] = ("request_id", "nonce")


def _templatize(value: Any, replacements: Sequence[tuple[str, str]]) -> Any:
    """Replace each (value -> placeholder) in a string, or in strings inside lists/dicts."""
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_templatize(v, replacements) for v in value]
    if isinstance(value, dict):
        return {k: _templatize(v, replacements) for k, v in value.items()}
    return value


def completion_to_record(
    completion: Completion,
    variables: Mapping[str, str],
    placeholders: Sequence[str] = DEFAULT_PLACEHOLDERS,
    purpose: str = "job",
    request: CompletionRequest | None = None,
) -> dict[str, Any]:
    """The replay-script line for ``completion``, with variable values as placeholders."""
    # Longest value first, so an id that contains another id is replaced whole.
    replacements = sorted(
        ((variables[k], "{{" + k + "}}") for k in placeholders if variables.get(k)),
        key=lambda pair: len(pair[0]),
        reverse=True,
    )
    record: dict[str, Any] = {
        "text": _templatize(completion.text, replacements),
        "finish_reason": completion.finish_reason,
    }
    if completion.tool_calls:
        record["tool_calls"] = [
            {"id": c.id, "name": c.tool, "arguments": _templatize(c.args, replacements)}
            for c in completion.tool_calls
        ]
    record["input_tokens"] = completion.input_tokens
    record["output_tokens"] = completion.output_tokens
    if purpose != "job":  # a side request's or the profile step's answers replay to it only
        record["for"] = purpose
    if request is not None:
        constraint = (
            "grammar" if request.grammar else "json_schema" if request.json_schema else None
        )
        record["sent"] = {"constraint": constraint, "native_tools": bool(request.tools)}
    return record


class RecordingProvider:
    """A provider that passes every call through and appends the completion to ``path``.

    The file is started afresh unless ``append`` is set: one run, one script.
    Each line is flushed as it is written, so a crashed run keeps what it got.
    """

    def __init__(
        self,
        inner: Provider,
        path: Path,
        *,
        append: bool = False,
        placeholders: Sequence[str] = DEFAULT_PLACEHOLDERS,
    ) -> None:
        self.inner = inner
        self.path = path
        self.name = inner.name
        self.supports_grammar = inner.supports_grammar
        self.supports_json_schema = bool(getattr(inner, "supports_json_schema", False))
        # A replay knows whether the recorded run's tools travelled natively (replay.py).
        self.carries_native_tools = getattr(inner, "carries_native_tools", None)
        self._placeholders = tuple(placeholders)
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        if not append or not path.exists():
            # Plain JSONL, no header line: `jq`, pandas and DuckDB read every line as JSON.
            path.write_text("", encoding="utf-8")

    def complete(self, request: CompletionRequest) -> Completion:
        completion = self.inner.complete(request)
        record = completion_to_record(
            completion, request.variables, self._placeholders, request.purpose, request
        )
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        return completion

    def refusal(self, request: CompletionRequest) -> str | None:
        """The inner provider's refusal (see ``providers.base.refusal``)."""
        return refusal(self.inner, request)

    def close(self) -> None:
        self.inner.close()
