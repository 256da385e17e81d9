"""`toolwire parse --transport T FILE|-`: what a protocol made of a model's text, as JSON.

One small handler per transport in a dict (no if/elif chain). Each returns
``(ok, payload)``; errors carry their codes (and line/column where there is
one) so a user can see exactly why an answer failed. Exit 1 when not ok.
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
    def __init__(self, nonce: str | None, strict: bool | None, workspace: Path | None) -> None:
        self.nonce = nonce
        self.strict = strict
        self.workspace = workspace


def _tool_specs(loaded: Any, transport: str) -> list[Any]:
    """The spec's tools with their effective schemas (built-ins bring their own)."""
    if loaded is None or not loaded.spec.tools:
        raise typer.BadParameter(
            f"transport {transport} checks calls against the spec's tools: pass --spec SPEC",
            param_hint="--spec",
        )
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
    from toolwire.librarian.validate import validate_operations
    from toolwire.librarian.workspace import Workspace

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


def _slots(mode: Literal["xml", "xml-final"]) -> Handler:
    def handle(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
        from toolwire.protocols.slots import normalize_nonce, parse_slots, slot_ids

        if not opts.nonce:
            raise typer.BadParameter(
                f"transport {mode} needs the run's nonce", param_hint="--nonce"
            )
        nonce = normalize_nonce(opts.nonce)
        tools = _tool_specs(loaded, mode)
        limits = loaded.spec.constraints
        slots = slot_ids(nonce, 1, limits.max_tool_calls_per_turn * limits.max_iterations)
        parsed = parse_slots(
            text, nonce=nonce, allowed_tools={t.name for t in tools}, slots=slots, mode=mode
        )
        return not parsed.invalid, parsed.to_dict()

    return handle


def _execute(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.execute import execute_parse_to_dict, parse_execute, tool_schemas

    try:
        parsed = parse_execute(text, tools=tool_schemas(_tool_specs(loaded, "execute")))
    except ProtocolError as exc:
        return False, {"error": exc.to_dict()}
    return True, execute_parse_to_dict(parsed)


def _xct(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.execute import tool_schemas
    from toolwire.protocols.xct import decision_to_dict, parse_decision

    tools = None
    if loaded is not None and loaded.spec.tools:
        tools = tool_schemas(_tool_specs(loaded, "xct"))
    try:
        return True, {"decision": decision_to_dict(parse_decision(text, tools=tools))}
    except ProtocolError as exc:
        return False, {"error": exc.to_dict()}


def _native(text: str, loaded: Any, opts: ParseOptions) -> tuple[bool, dict[str, Any]]:
    """Input: an assistant message as JSON (``{"content", "tool_calls": [...]}``)."""
    from toolwire.domain import Completion, ToolCall
    from toolwire.protocols.native import parse_native

    try:
        message = json.loads(text)
        calls = tuple(
            ToolCall(
                id=str(c.get("id", f"call_{i}")),
                tool=str(c["function"]["name"]),
                args=json.loads(c["function"].get("arguments") or "{}"),
            )
            for i, c in enumerate(message.get("tool_calls") or [])
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        error = {"code": "NATIVE_INVALID", "message": f"not an assistant message: {exc}"}
        return False, {"error": error}
    parsed = parse_native(Completion(text=message.get("content") or "", tool_calls=calls))
    return not parsed.invalid, {
        "calls": [{"id": c.id, "tool": c.tool, "args": c.args} for c in parsed.calls],
        "final": None if parsed.final is None else repr(parsed.final),
        "invalid": [repr(i) for i in parsed.invalid],
    }


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
) -> None:
    """Parse a model's answer: JSON on stdout; errors as JSON with codes and position, exit 1."""
    handler = HANDLERS.get(transport)
    if handler is None:
        raise typer.BadParameter(
            f"unknown transport {transport!r}; one of {', '.join(HANDLERS)}",
            param_hint="--transport",
        )
    if file == "-":
        text = sys.stdin.read()
    else:
        text = Path(file).read_text(encoding="utf-8", errors="replace")
    loaded = None
    if spec is not None:
        from toolwire.spec import load_spec

        loaded = load_spec(spec)
    ok, payload = handler(text, loaded, ParseOptions(nonce, strict, workspace))
    print(json.dumps({"ok": ok, **payload}, indent=2, ensure_ascii=False, default=str))
    raise typer.Exit(0 if ok else 1)
