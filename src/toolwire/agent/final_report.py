"""Layers 2 and 3 of seed 001's final report: the payload read by the agent's format,
then a clean ``FinalReport`` (status and format never enter the content).

Layer 1, the tag as written, is the transport's (``protocols.final_report.FinalTag``).
``sub-agent`` passes through, ``json`` parses (and validates against the spec's
schema), ``slack-block-kit`` parses and expects messages, text formats keep the text.

JSON payloads with a small defect are repaired mechanically before the model
is asked for a repair turn, each fix only when the result is unambiguous:
``CODE_FENCE`` (the JSON in a markdown code fence), ``JSON_IN_PROSE`` (one JSON
value with prose around it: the span from the first ``{``/``[`` to the last
``}``/``]`` must decode), ``TRAILING_COMMA`` (before ``}`` or ``]``, outside
strings). Nothing else is guessed: single quotes, comments, NaN, duplicate keys
or a missing brace still fail. ``metadata["repaired"]`` lists the fixes applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator, validators

from toolwire.domain import FinalReport
from toolwire.errors import ProtocolError, UsageError
from toolwire.protocols.final_report import (
    FINAL_STATUSES,
    REPORT_FORMATS,
    TRUNCATION_REJECTED,
    FinalTag,
)
from toolwire.protocols.text import fenced_span, loads_strict, lone_surrogate

__all__ = ["FINAL_REPORT_INVALID", "process_final_report", "repair_json"]

FINAL_REPORT_INVALID = "FINAL_REPORT_INVALID"
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\r?\n)+")
_MAX_LISTED = 20  # schema errors spelled out to the model; the rest are counted
# A string literal (skipped whole) or a comma followed only by blanks and a closer.
_TRAILING_COMMA_RE = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=[ \t\r\n]*[}\]])', re.S)


def _final_error(
    message: str, details: list[str], line: int | None = None, col: int | None = None
) -> ProtocolError:
    return ProtocolError(FINAL_REPORT_INVALID, message, line, col, details)


def _decodes(text: str) -> tuple[bool, Any]:
    try:
        return True, loads_strict(text)
    except (ValueError, RecursionError):
        return False, None


def repair_json(raw: str) -> tuple[Any, list[str]] | None:
    """The value ``raw`` was meant to hold and the fixes applied, or None if it cannot be
    repaired without guessing. Call it only after a strict decode failed."""
    fixes: list[str] = []
    text = raw.strip()
    span = fenced_span(text)
    if span is not None:
        text = text[span[0] : span[1]].strip()
        fixes.append("CODE_FENCE")
    if text[:1] not in ("{", "["):
        starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
        end = max(text.rfind("}"), text.rfind("]"))
        if not starts or end < min(starts):
            return None
        text = text[min(starts) : end + 1]
        fixes.append("JSON_IN_PROSE")
    ok, value = _decodes(text)
    if not ok:
        fixed = _TRAILING_COMMA_RE.sub(lambda m: m.group() if m.group() != "," else "", text)
        ok, value = _decodes(fixed) if fixed != text else (False, None)
        if not ok:
            return None
        fixes.append("TRAILING_COMMA")
    return (value, fixes) if fixes else None


def _load_json(raw: str, what: str, repairs: list[str]) -> Any:
    """The payload's JSON value; a mechanically repairable defect is fixed and noted."""
    text = raw.strip()
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as exc:
        repaired = repair_json(text)
        if repaired is None:
            raise _final_error(
                f"The {what} final report is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno} of the report: write one complete JSON value.",
                ["INVALID_JSON"],
                exc.lineno,
                exc.colno,
            ) from None
        value, fixes = repaired
        repairs += fixes
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise _final_error(
            f"The {what} final report is not valid JSON: {reason}.", ["INVALID_JSON"]
        ) from None
    if lone_surrogate(value, text):
        raise _final_error(
            f"The {what} final report has an unpaired surrogate escape: remove it.",
            ["INVALID_CHARACTER"],
        )
    return value


def _json_path(path: Sequence[Any]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _validate(value: Any, schema: Mapping[str, Any]) -> None:
    """Check a JSON payload against the spec's schema, every error listed for the repair."""
    schema = dict(schema)
    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        errors = list(cls(schema).iter_errors(value))
    except Exception as exc:  # a schema that cannot be applied is the spec's fault, not the model's
        raise UsageError(f"the final report schema cannot be applied: {exc}") from exc
    if not errors:
        return
    errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
    details = [f"SCHEMA:{_json_path(e.absolute_path)}:{e.validator}" for e in errors]
    lines = [f"at {_json_path(e.absolute_path)}: {e.message[:200]}" for e in errors[:_MAX_LISTED]]
    raise _final_error(
        "The JSON final report does not match the schema: " + "; ".join(lines) + ".", details
    )


def _slack_messages(value: Any) -> Any:
    # The seed's shape is {"messages": [...]}; models (and the upstream's captured
    # payloads) also write the bare array. Both are accepted, one shape comes out.
    if isinstance(value, list):
        value = {"messages": value}
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list) or not messages:
        raise _final_error(
            'The slack-block-kit final report must be a JSON object with a non-empty "messages" '
            'array: write {"messages": [{"blocks": [...]}]}.',
            ["MISSING_MESSAGES"],
        )
    bad = [
        f"messages[{i}]:NOT_AN_OBJECT" for i, m in enumerate(messages) if not isinstance(m, dict)
    ]
    if bad:
        raise _final_error(
            "Every slack-block-kit message must be a JSON object with its blocks.", bad
        )
    return value


def process_final_report(
    tag: FinalTag, *, expected_format: str, schema: Mapping[str, Any] | None = None
) -> FinalReport:
    """Seed 001's three layers: transport fields from the tag, the payload processed
    by format, a clean ``FinalReport``. Status and format never enter the content.

    Raises ``ProtocolError(FINAL_REPORT_INVALID)`` for what the model must repair
    (format mismatch, bad JSON, schema violations, no slack messages array).
    """
    if tag.status not in FINAL_STATUSES:
        raise _final_error(
            f'The final report status is "{tag.status}": use success, failure or partial.',
            ["INVALID_STATUS"],
        )
    if tag.format != expected_format:
        raise _final_error(
            f'The final report has format="{tag.format}", but this agent reports in '
            f'{expected_format}: write format="{expected_format}" and a {expected_format} report.',
            [f"FORMAT_MISMATCH:{tag.format}"],
        )
    if expected_format not in REPORT_FORMATS:
        raise UsageError(f"unknown final report format {expected_format!r}")
    repairs: list[str] = []
    content: Any = tag.raw_payload  # sub-agent: an opaque blob, passed through untouched
    if expected_format in TRUNCATION_REJECTED:  # json, slack-block-kit
        content = _load_json(content, expected_format, repairs)
        if expected_format != "json":
            content = _slack_messages(content)
        elif schema is not None:
            _validate(content, schema)
    elif expected_format != "sub-agent":
        # Raw text, minus the layout the tag adds: blank lines after the opening tag and
        # whitespace before the closing one. Indentation of the first line is kept.
        content = _LEADING_BLANK_LINES_RE.sub("", content).rstrip()
    status = cast(Literal["success", "failure", "partial"], tag.status)
    metadata: dict[str, Any] = {"truncated": True} if tag.truncated else {}
    if repairs:
        metadata["repaired"] = repairs
    return FinalReport(status=status, format=tag.format, content=content, metadata=metadata)
