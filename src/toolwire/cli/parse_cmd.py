"""`toolwire parse --transport T FILE|-`: what a protocol made of a model's text, as JSON.

One small handler per transport in a dict (no if/elif chain). Each returns
``(ok, payload)``; errors carry their codes (and line/column where there is
one) so a user can see exactly why an answer failed. Exit 1 when not ok.

Without ``--spec`` every transport checks the wire format alone (any tool,
any slot; xml/xml-final take the nonce of the first tag unless ``--nonce``
says it). With ``--spec`` the tool transports also print ``turn``: the
engine's own verdict (``toolwire.agent.turn_check``), every error a run would
report. ``--finish-reason`` judges the reply as the provider's stop reason
says (``length``/``max_tokens``: cut; ``content_filter``: withheld, not read).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

__all__ = ["parse"]

Handler = Callable[[str, Any, "ParseOptions"], tuple[bool, dict[str, Any]]]


class ParseOptions:
    def __init__(
        self,
        nonce: str | None,
        strict: bool | None,
        workspace: Path | None,
        finish_reason: str = "stop",
    ) -> None:
        self.nonce = nonce
        self.strict = strict
        self.workspace = workspace
        self.finish_reason = finish_reason


def _tool_specs(loaded: Any) -> list[Any] | None:
    """The spec's tools with their effective schemas (built-ins bring their own); None
    without a spec: any tool is accepted and only the wire format is checked."""
    if loaded is None or not loaded.spec.tools:
        return None
    from toolwire.tools import build_registry

    # Parsing runs nothing: the workspace only anchors built-ins, so the spec's folder will do.
    return build_registry(loaded.spec.tools, workspace=loaded.base_dir).tools


def _attrless(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.attrless import parse_response, response_to_dict

    strict = opts.strict
    if strict is None:
        strict = bool(loaded and loaded.spec.constraints.strict_mode)
    try:
        response = parse_response(text, strict=strict)
    except ProtocolError as exc:
        return False, {"error": exc.to_dict()}
    result: dict[str, Any] = {"response": response_to_dict(response)}
    if loaded is None:
        return True, result
    result["validation"] = _validate_librarian(response, loaded, opts.workspace)
    return not any(v["status"] == "rejected" for v in result["validation"]), result


def _validate_librarian(response: Any, loaded: Any, workspace: Path | None) -> list[dict[str, Any]]:
    from toolwire.librarian.notes.workspace import Workspace
    from toolwire.librarian.validate import validate_operations

    root = workspace
    if root is None and loaded.spec.schedule is not None:
        root = loaded.base_dir / loaded.spec.schedule.workspace
    if root is None:
        raise typer.BadParameter("validation needs a notes folder", param_hint="--workspace")
    outcomes = validate_operations(
        response,
        Workspace.load(root),
        turn=0,
        constraints=loaded.spec.constraints,
        topics=loaded.spec.taxonomy.topics,
    )
    return [
        {
            "operation_id": o.operation.operation_id,
            "kind": o.operation.kind,
            "target": o.operation.target,
            "status": o.status,
            "code": o.code,
            "detail": o.detail,
        }
        for o in outcomes
    ]


def _final_report(parsed: Any, loaded: Any) -> tuple[bool, dict[str, Any]]:
    """Layers 2-3 of the final report: by the spec's format, else by the tag's own."""
    from toolwire.agent.final_report import process_final_report
    from toolwire.errors import ProtocolError

    report_spec = loaded.spec.final_report if loaded is not None else None
    fmt = report_spec.format if report_spec else parsed.final.format
    schema = report_spec.schema_ if report_spec else None
    try:
        report = process_final_report(parsed.final, expected_format=fmt, schema=schema)
    except ProtocolError as exc:
        return False, {"expected_format": fmt, "error": exc.to_dict()}
    body = {"status": report.status, "format": report.format, "content": report.content}
    return True, {"expected_format": fmt, "report": {**body, "metadata": report.metadata}}


def _slots(mode: Literal["xml", "xml-final"]) -> Handler:
    def handle(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
        from toolwire.protocols.slots import find_nonce, normalize_nonce, parse_slots, slot_ids

        found = opts.nonce or find_nonce(text)
        if not found:  # no tag at all: nothing to check a nonce against
            return False, {"error": {"code": "NO_TAGS", "message": "no <ai-agent-...> tag"}}
        nonce = normalize_nonce(found)
        tools = _tool_specs(loaded)
        slots = None
        if loaded is not None:
            limits = loaded.spec.constraints
            slots = slot_ids(nonce, 1, limits.max_tool_calls_per_turn * limits.max_iterations)
        allowed = None if tools is None else {t.name for t in tools}
        parsed = parse_slots(
            text,
            nonce=nonce,
            allowed_tools=allowed,
            slots=slots,
            mode=mode,
            finish_reason=opts.finish_reason,
        )
        payload: dict[str, Any] = {"nonce": nonce, **parsed.to_dict()}
        ok = not parsed.invalid and not parsed.notes
        if parsed.final is not None:
            report_ok, payload["final_report"] = _final_report(parsed, loaded)
            ok = ok and report_ok
        return ok, payload

    return handle


def _execute(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.execute import (
        ANY_TOOL,
        execute_parse_to_dict,
        parse_execute,
        tool_schemas,
    )

    tools = _tool_specs(loaded)
    schemas = ANY_TOOL if tools is None else tool_schemas(tools)
    try:
        parsed = parse_execute(text, tools=schemas, finish_reason=opts.finish_reason)
    except ProtocolError as exc:
        return False, {"error": exc.to_dict()}
    return True, execute_parse_to_dict(parsed)


def _xct(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.execute import tool_schemas
    from toolwire.protocols.xct import decision_to_dict, parse_decision

    tools = _tool_specs(loaded)
    schemas = None if tools is None else tool_schemas(tools)
    try:
        return True, {"decision": decision_to_dict(parse_decision(text, tools=schemas))}
    except ProtocolError as exc:
        return False, {"error": exc.to_dict()}


def _native_completion(text: str, finish_reason: str) -> Any:
    """An assistant message as JSON (``{"content", "tool_calls": [...]}``), or plain text:
    a reply with no tool call (where leaked calls hide)."""
    from toolwire.domain import Completion, ToolCall

    try:
        message = json.loads(text)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        return Completion(text=text, finish_reason=finish_reason)
    calls = tuple(
        ToolCall(
            id=str(c.get("id", f"call_{i}")),
            tool=str(c["function"]["name"]),
            args=json.loads(c["function"].get("arguments") or "{}"),
        )
        for i, c in enumerate(message.get("tool_calls") or [])
    )
    content = message.get("content") or ""
    return Completion(text=content, tool_calls=calls, finish_reason=finish_reason)


def _native(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.protocols.native import find_leaked_calls, parse_native

    try:
        completion = _native_completion(text, opts.finish_reason)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        error = {"code": "NATIVE_INVALID", "message": f"not an assistant message: {exc}"}
        return False, {"error": error}
    parsed = parse_native(completion)
    leaked = find_leaked_calls(completion.text) if parsed.answered else None
    payload = {
        "calls": [{"id": c.id, "tool": c.tool, "args": c.args} for c in parsed.calls],
        "final": None if parsed.final is None else repr(parsed.final),
        "invalid": [repr(i) for i in parsed.invalid],
        "leaked": []
        if leaked is None
        else [
            {"tool": c.tool, "args": c.args, "shape": c.shape, "line": c.line, "column": c.column}
            for c in leaked.calls
        ],
        "leaked_problems": [] if leaked is None else leaked.problems,
    }
    return not parsed.invalid and not payload["leaked_problems"], payload


HANDLERS: dict[str, Handler] = {
    "xml_attrless": _attrless,
    "xml": _slots("xml"),
    "xml-final": _slots("xml-final"),
    "execute": _execute,
    "xct": _xct,
    "native": _native,
}


def parse(
    file: Annotated[str, typer.Argument(help="Model output file, or - for stdin")],
    transport: Annotated[
        str, typer.Option(help="Wire format: " + ", ".join(HANDLERS))
    ] = "xml_attrless",
    spec: Annotated[
        Path | None, typer.Option(help="Validate against this spec (its tools / constraints)")
    ] = None,
    nonce: Annotated[str | None, typer.Option(help="xml / xml-final: the run's nonce")] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="xml_attrless with --spec: check targets in this folder")
    ] = None,
    strict: Annotated[bool | None, typer.Option(help="Strict mode [default: the spec's]")] = None,
    finish_reason: Annotated[
        str,
        typer.Option(
            help="The provider's stop reason: stop, length (or max_tokens: cut by the output "
            "limit), content_filter (output withheld), tool_calls"
        ),
    ] = "stop",
) -> None:
    """Parse a model's answer: JSON on stdout; errors as JSON with codes and position, exit 1."""
    handler = HANDLERS.get(transport)
    if handler is None:
        raise typer.BadParameter(
            f"unknown transport {transport!r}; one of {', '.join(HANDLERS)}",
            param_hint="--transport",
        )
    text = _read_answer(file)
    from toolwire.stop_reasons import (
        CONTENT_FILTER,
        filtered_error,
        normalize_finish_reason,
    )

    reason = normalize_finish_reason(finish_reason)
    if reason == CONTENT_FILTER:  # withheld output is never read, whatever the transport
        error = filtered_error(finish_reason).to_dict()
        _print(False, {"finish_reason": reason, "error": error})
        raise typer.Exit(1)
    loaded = None
    if spec is not None:
        from toolwire.spec.model import load_spec

        loaded = load_spec(spec)
    opts = ParseOptions(nonce, strict, workspace, reason)
    ok, payload = handler(text, loaded, opts)
    payload = {"finish_reason": reason, **payload}
    if spec is not None and transport in TOOL_TRANSPORTS:
        turn_ok, payload["turn"] = _engine_verdict(spec, transport, text, opts, payload)
        ok = ok and turn_ok
    _print(ok, payload)
    raise typer.Exit(0 if ok else 1)


TOOL_TRANSPORTS = ("native", "xml", "xml-final", "execute", "xct")


def _engine_verdict(
    spec: Path, transport: str, text: str, opts: ParseOptions, payload: dict[str, Any]
) -> tuple[bool, dict[str, Any]]:
    from toolwire.agent.turn_check import check_turn
    from toolwire.domain import Completion

    if transport == "native":
        completion = _native_completion(text, opts.finish_reason)
    else:
        completion = Completion(text=text, finish_reason=opts.finish_reason)
    nonce = payload.get("nonce") or opts.nonce
    return check_turn(spec, transport, completion, nonce=nonce, workspace=opts.workspace)


def _print(ok: bool, payload: dict[str, Any]) -> None:
    print(json.dumps({"ok": ok, **payload}, indent=2, ensure_ascii=False, default=str))


# A model's answer is kilobytes; `parse /dev/zero` read until the kernel killed it (23 GB).
MAX_ANSWER_BYTES = 16 * 1024 * 1024


def _read_answer(file: str) -> str:
    """The answer in ``file`` (``-``: stdin), refused past MAX_ANSWER_BYTES."""
    if file == "-":
        data = sys.stdin.buffer.read(MAX_ANSWER_BYTES + 1)
    else:
        with Path(file).open("rb") as handle:
            data = handle.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        from toolwire.errors import UsageError

        limit = MAX_ANSWER_BYTES // (1024 * 1024)
        raise UsageError(f"{file}: more than {limit} MiB; a model's answer is far smaller")
    return data.decode("utf-8", errors="replace")
