"""Constrained output by JSON Schema (issue 19, item 7): what each server gets.

The exact request bodies are captured from the real ``openai`` client over an
in-memory transport, per server kind: xct's decision schema as
``response_format`` (OpenAI, Ollama, vLLM: ``json_schema``; llama.cpp:
``json_object`` with ``schema``), strict function parameters for OpenAI's
native tools, and the grammar instead of the schema where one travels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest

from toolwire.agent import load_agent_context
from toolwire.agent.loop import render_first_request
from toolwire.domain import CompletionRequest
from toolwire.errors import ProtocolError
from toolwire.protocols.native import final_report_definition, tool_definition
from toolwire.protocols.xct import decision_schema, parse_decision
from toolwire.providers.openai_compat import OpenAIProvider
from toolwire.providers.structured import (
    constraint_for,
    schema_name,
    strict_schema,
    strict_tools,
)
from toolwire.spec.model import ModelConfig
from toolwire.spec.settings import Settings
from toolwire.tools.builtins import BUILTIN_SCHEMAS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
BASE_URL = "http://127.0.0.1:8765/v1"
GBNF = 'root ::= "{}"'


class _Tool:
    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name, self.description, self.args = name, f"the {name} tool", args


TOOLS = [_Tool(name, schema) for name, schema in BUILTIN_SCHEMAS.items()]
SCHEMAS = {tool.name: tool.args for tool in TOOLS}
DECISION = decision_schema(TOOLS)


def _ok(content: str = '{"done": true, "message": "ok"}') -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=_ok())


def _sent(server: str, request: CompletionRequest) -> dict[str, Any]:
    """The JSON body the openai client sends to ``server`` for ``request``."""
    recorder = _Recorder()
    client = httpx2.Client(transport=httpx2.MockTransport(recorder))
    provider = OpenAIProvider("m", base_url=BASE_URL, server=server, http_client=client)
    try:
        provider.complete(request)
    finally:
        provider.close()
    (body,) = recorder.bodies
    return body


def _ask(**fields: Any) -> CompletionRequest:
    return CompletionRequest(messages=[{"role": "user", "content": "Index the folder."}], **fields)


# ------------------------------------------------------------------ the decision schema

VALID = [
    '{"next_step": {"tool": "read_file", "arguments": {"path": "a.md"}, "goal": "read a"}}',
    '{"next_step": {"tool": "list_dir", "arguments": {}, "goal": "look"}}',
    '{"next_step": {"tool": "search_text", "arguments": {"query": "x", "max_results": 3},'
    ' "goal": "find x"}}',
    '{"done": true, "message": "All done."}',
]
INVALID = [
    '{"next_step": {"tool": "rm", "arguments": {}, "goal": "x"}}',  # no such tool
    '{"next_step": {"tool": "read_file", "arguments": {}, "goal": "x"}}',  # missing arg
    '{"next_step": {"tool": "read_file", "arguments": {"path": 3}, "goal": "x"}}',
    '{"next_step": {"tool": "list_dir", "arguments": {}}}',  # no goal
    '{"next_step": {"tool": "list_dir", "arguments": {}, "goal": "x", "why": "y"}}',
    '{"done": false, "message": "not yet"}',
    '{"done": true}',
    '{"done": true, "message": "x", "next_step": {}}',
    '{"next_step": {"tool": "search_text", "arguments": {"query": "x", "max_results": 0},'
    ' "goal": "x"}}',
]


@pytest.mark.parametrize("text", VALID)
def test_what_the_schema_admits_parses_as_a_decision(text: str) -> None:
    jsonschema.validate(json.loads(text), DECISION)
    parse_decision(text, tools=SCHEMAS)  # raises on anything the system would refuse


@pytest.mark.parametrize("text", INVALID)
def test_what_the_parser_refuses_the_schema_refuses(text: str) -> None:
    with pytest.raises(ProtocolError):
        parse_decision(text, tools=SCHEMAS)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(text), DECISION)


def test_the_decision_schema_is_a_valid_schema_named_for_the_request() -> None:
    jsonschema.Draft202012Validator.check_schema(DECISION)
    assert schema_name(DECISION) == "xct_decision"
    steps = DECISION["anyOf"][0]["properties"]["next_step"]["anyOf"]
    assert [s["properties"]["tool"]["enum"] for s in steps] == [[t.name] for t in TOOLS]
    assert all(s["properties"]["arguments"] == t.args for s, t in zip(steps, TOOLS, strict=True))


# ------------------------------------------------------------------ the request per server

# server -> the response_format it gets for the decision schema
RESPONSE_FORMATS: dict[str, dict[str, Any]] = {
    # A root anyOf is outside OpenAI's strict subset: the schema goes as guidance.
    "openai": {
        "type": "json_schema",
        "json_schema": {"name": "xct_decision", "schema": DECISION, "strict": False},
    },
    "ollama": {"type": "json_schema", "json_schema": {"name": "xct_decision", "schema": DECISION}},
    "vllm": {"type": "json_schema", "json_schema": {"name": "xct_decision", "schema": DECISION}},
    "llamacpp": {"type": "json_object", "schema": DECISION},
}


@pytest.mark.parametrize("server", sorted(RESPONSE_FORMATS))
def test_each_server_gets_the_decision_schema_in_its_own_field(server: str) -> None:
    body = _sent(server, _ask(json_schema=DECISION))
    assert body["response_format"] == RESPONSE_FORMATS[server]
    assert not {"grammar", "structured_outputs", "format", "guided_json"} & set(body)


@pytest.mark.parametrize("server", ["llamacpp", "vllm"])
def test_a_grammar_wins_over_the_schema_where_it_travels(server: str) -> None:
    body = _sent(server, _ask(grammar=GBNF, json_schema=DECISION))
    assert "response_format" not in body
    assert body.get("grammar", body.get("structured_outputs", {}).get("grammar")) == GBNF


def test_a_schema_that_qualifies_goes_strict_to_openai() -> None:
    schema = {
        "title": "Person record",
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {}}},
        "required": ["name", "tags"],
    }
    schema["properties"]["tags"]["items"] = {"type": "string"}
    body = _sent("openai", _ask(json_schema=schema))
    sent = body["response_format"]["json_schema"]
    assert sent["name"] == "Person_record" and sent["strict"] is True
    assert sent["schema"] == {**schema, "additionalProperties": False}
    assert "additionalProperties" not in schema  # the caller's schema is left alone


NATIVE_TOOLS = [tool_definition(t.name, t.description, t.args) for t in TOOLS] + [
    final_report_definition("text")
]


def test_openai_gets_strict_parameters_where_they_qualify() -> None:
    body = _sent("openai", _ask(tools=NATIVE_TOOLS, strict_tools=True))
    functions = {tool["function"]["name"]: tool["function"] for tool in body["tools"]}
    # read_file, write_file and the final report require every property: strict.
    for name in ("read_file", "write_file", "agent__final_report"):
        assert functions[name]["strict"] is True
        assert functions[name]["parameters"]["additionalProperties"] is False
    # list_dir's arguments are optional, search_text's too (and minLength): as declared.
    for name in ("list_dir", "search_text"):
        assert "strict" not in functions[name]
        assert functions[name]["parameters"] == BUILTIN_SCHEMAS[name]
    assert "response_format" not in body


@pytest.mark.parametrize("server", ["ollama", "vllm", "llamacpp"])
def test_other_servers_get_the_tools_as_declared(server: str) -> None:
    body = _sent(server, _ask(tools=NATIVE_TOOLS, strict_tools=True))
    assert body["tools"] == NATIVE_TOOLS


def test_unconstrained_requests_carry_no_schema_and_no_strict() -> None:
    body = _sent("openai", _ask(tools=NATIVE_TOOLS))
    assert body["tools"] == NATIVE_TOOLS and "response_format" not in body


# ------------------------------------------------------------------ the strict subset


@pytest.mark.parametrize(
    ("schema", "qualifies"),
    [
        ({"type": "object", "properties": {}}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, False),  # optional
        ({"type": "object"}, False),  # free-form: strict would allow only {}
        ({"type": "object", "additionalProperties": False}, True),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": True,
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 1}},
                "required": ["a"],
            },
            False,
        ),  # fmt: skip
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "format": "uri"}},
                "required": ["a"],
            },
            False,
        ),  # fmt: skip
        (
            {
                "type": "object",
                "properties": {
                    "o": {"type": "object", "properties": {"x": {"type": "integer"}}},
                },
                "required": ["o"],
            },
            False,
        ),  # the nested object's property is optional
        (
            {
                "type": "object",
                "properties": {
                    "o": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                {"type": "string", "enum": ["a"]},
                                {"type": "null"},
                            ]
                        },
                    },
                },
                "required": ["o"],
            },
            True,
        ),
        ({"anyOf": [{"type": "object", "properties": {}}]}, False),  # the root is no object
    ],
)
def test_strict_schema_only_for_the_subset_that_keeps_its_meaning(
    schema: dict[str, Any], qualifies: bool
) -> None:
    strict = strict_schema(schema)
    assert (strict is not None) is qualifies
    if strict is not None:
        jsonschema.Draft202012Validator.check_schema(strict)


def test_strict_tools_leave_the_definitions_they_do_not_change_alone() -> None:
    out = strict_tools(NATIVE_TOOLS)
    assert [t["function"]["name"] for t in out] == [t["function"]["name"] for t in NATIVE_TOOLS]
    assert NATIVE_TOOLS[0]["function"].get("strict") is None  # copies, not edits


# ------------------------------------------------------------------ which constraint a run uses


class _Caps:
    def __init__(self, grammar: bool, schema: bool | None) -> None:
        self.supports_grammar = grammar
        if schema is not None:
            self.supports_json_schema = schema


@pytest.mark.parametrize(
    ("constrain", "grammar", "schema", "expected"),
    [
        ("grammar", True, True, "grammar"),  # llama.cpp (in process or server), vLLM
        ("grammar", False, True, "json_schema"),  # OpenAI, Ollama
        ("grammar", False, False, None),  # replay
        ("grammar", False, None, None),  # a provider written before json_schema existed
        ("json_schema", True, True, "json_schema"),
        ("json_schema", False, False, None),
        ("none", True, True, None),
    ],
)
def test_constraint_for(constrain: str, grammar: bool, schema: bool | None, expected: str) -> None:
    assert constraint_for(constrain, _Caps(grammar, schema)) == expected


@pytest.mark.parametrize(
    ("name", "server", "expected"),
    [
        ("openai:gpt-4o-mini", "openai", "json_schema"),
        ("openai:llama3.2", "ollama", "json_schema"),
        ("openai:q", "vllm", "grammar"),
        ("openai:smollm2", "llamacpp", "grammar"),
        ("llamacpp:smollm2-135m", "openai", "grammar"),
    ],
)
def test_constraint_without_a_provider_follows_the_model_config(
    name: str, server: str, expected: str
) -> None:
    cfg = ModelConfig(name=name, server=server)  # type: ignore[arg-type]
    assert constraint_for("grammar", None, cfg) == expected


# ------------------------------------------------------------------ an agent's first request


def _first_request(transport: str, server: str, tmp_path: Path) -> dict[str, Any]:
    """The first request of the shipped agent spec, as the openai client sends it."""
    ctx = load_agent_context(
        REPO / "specs" / f"agent-{transport}.yaml",
        workspace=tmp_path,
        model="openai:m",
        settings=Settings(),
    )
    ctx.model_cfg = ctx.model_cfg.model_copy(update={"server": server})
    recorder = _Recorder()
    client = httpx2.Client(transport=httpx2.MockTransport(recorder))
    ctx.provider = OpenAIProvider("m", base_url=BASE_URL, server=server, http_client=client)
    try:
        ctx.provider.complete(render_first_request(ctx))
    finally:
        ctx.provider.close()
    return recorder.bodies[0]


@pytest.mark.parametrize("server", sorted(RESPONSE_FORMATS))
def test_an_xct_agent_sends_its_decision_schema_or_grammar(server: str, tmp_path: Path) -> None:
    body = _first_request("xct", server, tmp_path)
    if server in ("llamacpp", "vllm"):  # constrain: grammar, and the grammar travels
        grammar = body.get("grammar", body.get("structured_outputs", {}).get("grammar"))
        assert "response_format" not in body and grammar.startswith("root ::= ")
        return
    sent = body["response_format"]["json_schema"]["schema"]
    names = [s["properties"]["tool"]["enum"][0] for s in sent["anyOf"][0]["properties"]
             ["next_step"]["anyOf"]]  # fmt: skip
    assert names == ["list_dir", "read_file", "write_file", "search_text"]


def test_a_native_agent_on_openai_sends_strict_tools(tmp_path: Path) -> None:
    body = _first_request("native", "openai", tmp_path)
    strict = {t["function"]["name"] for t in body["tools"] if t["function"].get("strict")}
    assert strict == {"read_file", "write_file", "agent__final_report"}
    assert "response_format" not in body


@pytest.mark.parametrize("transport", ["execute", "xml"])
def test_xml_transports_get_nothing_from_openai(transport: str, tmp_path: Path) -> None:
    body = _first_request(transport, "openai", tmp_path)
    assert "response_format" not in body and "grammar" not in body
    assert all("strict" not in t["function"] for t in body.get("tools", []))


def _nested(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    node = root
    for _ in range(levels):
        inner: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        node["properties"]["a"], node["required"] = inner, ["a"]
        node = inner
    return root


def test_strict_stops_at_ten_levels_and_never_overflows_the_stack() -> None:
    assert strict_schema(_nested(10)) is not None
    assert strict_schema(_nested(11)) is None
    assert strict_schema(_nested(5000)) is None  # a hostile spec: refused, no RecursionError
