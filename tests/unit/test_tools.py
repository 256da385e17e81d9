"""Tools: argument coercion and checking (vectors), the registry, the executor, the built-ins.

Vectors in tests/data/tools/:
- coerce.json: ``{name, schema, value, expected}`` for ``coerce_value``;
- check_args.json: ``{name, schema, args, expected}`` with the expected detail codes in order.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from toolwire.arguments import check_args, coerce_args, coerce_value
from toolwire.domain import ToolCall
from toolwire.errors import UsageError
from toolwire.spec.model import ToolSpec
from toolwire.tools import (
    BUILTIN_SCHEMAS,
    OVER_BUDGET_TEXT,
    OutputBudget,
    Tool,
    ToolFailed,
    build_registry,
    run_call,
    run_calls,
)

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "tools"
COERCE = json.loads((DATA / "coerce.json").read_text("utf-8"))
CHECK = json.loads((DATA / "check_args.json").read_text("utf-8"))


# ---------------------------------------------------------------- coercion and checking


@pytest.mark.parametrize("case", COERCE, ids=[c["name"] for c in COERCE])
def test_coerce_value_vector(case: dict[str, Any]) -> None:
    result = coerce_value(case["value"], case["schema"])
    assert result == case["expected"]
    assert type(result) is type(case["expected"])


def test_coerce_args_converts_declared_properties_only() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    out = coerce_args({"n": "3", "s": "4", "extra": "5"}, schema)
    assert out == {"n": 3, "s": "4", "extra": "5"}


@pytest.mark.parametrize("case", CHECK, ids=[c["name"] for c in CHECK])
def test_check_args_vector(case: dict[str, Any]) -> None:
    problems = check_args(case["args"], case["schema"])
    assert [p.detail for p in problems] == case["expected"]
    assert all(p.message for p in problems)


def test_coerced_text_passes_the_check_that_raw_text_fails() -> None:
    schema = BUILTIN_SCHEMAS["search_text"]
    raw = {"query": "alpha", "max_results": "5"}
    assert [p.detail for p in check_args(raw, schema)] == ["INVALID_VALUE:max_results"]
    assert check_args(coerce_args(raw, schema), schema) == []


# ---------------------------------------------------------------- registry


def _spec(name: str, implementation: str, **extra: Any) -> ToolSpec:
    return ToolSpec.model_validate(
        {"name": name, "description": f"{name} tool", "implementation": implementation, **extra}
    )


def test_builtin_without_args_gets_its_default_schema(tmp_path: Path) -> None:
    registry = build_registry([_spec("read", "builtin:read_file")], workspace=tmp_path)
    assert list(registry) == ["read"]
    assert registry["read"].args == BUILTIN_SCHEMAS["read_file"]
    assert registry.schemas() == {"read": BUILTIN_SCHEMAS["read_file"]}


def test_builtin_with_an_argument_it_does_not_take_is_refused(tmp_path: Path) -> None:
    args = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "mode": {"type": "string"}},
    }
    with pytest.raises(UsageError, match="mode"):
        build_registry([_spec("read", "builtin:read_file", args=args)], workspace=tmp_path)


def test_python_implementation_is_imported_and_called_with_keywords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tw_sample_tools.py").write_text(
        "def shout(text):\n    return text.upper()\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    registry = build_registry(
        [_spec("shout", "python:tw_sample_tools:shout", args=args)],
        workspace=tmp_path,
        allow_python=True,
    )
    outcome = run_call(registry, ToolCall("c1", "shout", {"text": "hi"}))
    assert (outcome.status, outcome.result.content) == ("success", "HI")


@pytest.mark.parametrize(
    ("implementation", "message"),
    [
        ("python:tw_no_such_module_xyz:fn", "cannot import"),
        ("python:json:no_such_function", "no callable"),
    ],
)
def test_python_implementation_that_cannot_load_fails_up_front(
    tmp_path: Path, implementation: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        build_registry([_spec("t", implementation)], workspace=tmp_path, allow_python=True)


def test_python_implementation_needs_the_users_opt_in(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="TOOLWIRE_ALLOW_PYTHON_TOOLS"):
        build_registry([_spec("t", "python:os:system")], workspace=tmp_path, allow_python=False)


# ---------------------------------------------------------------- executor


def _tool(name: str, fn: Any, schema: dict[str, Any] | None = None, timeout: float = 5.0) -> Tool:
    schema = schema or {"type": "object", "properties": {"x": {"type": "integer"}}}
    return Tool(name, f"{name} tool", schema, f"python:tests:{name}", timeout, fn)


def test_unknown_tool_is_invalid_and_names_the_available_ones() -> None:
    outcome = run_call({"a": _tool("a", lambda **_: 1)}, ToolCall("c", "b", {}))
    assert (outcome.status, outcome.error) == ("invalid", "UNKNOWN_TOOL")
    assert outcome.result.status == "failure" and "a" in outcome.result.content


def test_invalid_arguments_never_reach_the_tool() -> None:
    ran: list[Any] = []
    tools = {"t": _tool("t", lambda **kw: ran.append(kw))}
    outcome = run_call(tools, ToolCall("c", "t", {"x": "not a number"}))
    assert (outcome.status, outcome.error) == ("invalid", "INVALID_ARGS")
    assert "INVALID_VALUE:x" in outcome.result.content
    assert ran == []


def test_an_exception_becomes_a_failure_result() -> None:
    def boom(**_: Any) -> None:
        raise ValueError("disk on fire")

    outcome = run_call({"t": _tool("t", boom)}, ToolCall("c", "t", {}))
    assert outcome.status == "failure"
    assert outcome.result.content == "ValueError: disk on fire"
    assert outcome.error == "TOOL_EXCEPTION: ValueError: disk on fire"


def test_tool_failed_gives_its_own_message() -> None:
    def refuse(**_: Any) -> None:
        raise ToolFailed("no such note")

    outcome = run_call({"t": _tool("t", refuse)}, ToolCall("c", "t", {}))
    assert (outcome.status, outcome.result.content) == ("failure", "no such note")
    assert outcome.error == "TOOL_FAILED: no such note"


def test_sys_exit_in_a_tool_does_not_end_the_run() -> None:
    def leave(**_: Any) -> None:
        raise SystemExit(3)

    outcome = run_call({"t": _tool("t", leave)}, ToolCall("c", "t", {}))
    assert outcome.status == "failure" and outcome.error.startswith("TOOL_EXCEPTION: SystemExit")


def test_a_tool_past_its_timeout_is_a_failure() -> None:
    release = threading.Event()
    tools = {"slow": _tool("slow", lambda **_: release.wait(30), timeout=0.05)}
    try:
        outcome = run_call(tools, ToolCall("c", "slow", {}))
    finally:
        release.set()  # let the abandoned worker thread finish
    assert outcome.status == "failure"
    assert outcome.error.startswith("TOOL_TIMEOUT")
    assert "timed out after 0.05s" in outcome.result.content


def test_output_over_the_budget_is_replaced_and_the_budget_is_shared() -> None:
    tools = {"big": _tool("big", lambda **_: "x" * 60)}
    budget = OutputBudget(100)
    first, second = run_calls(
        tools, [ToolCall("1", "big", {}), ToolCall("2", "big", {})], budget=budget
    )
    assert (first.status, first.result.content) == ("success", "x" * 60)
    assert (second.status, second.result.content) == ("failure", OVER_BUDGET_TEXT)
    assert second.error.startswith("CONTEXT_BUDGET_EXCEEDED")
    assert budget.remaining == 40


def test_a_value_json_cannot_hold_is_returned_as_text() -> None:
    outcome = run_call({"t": _tool("t", lambda **_: Path("a/b"))}, ToolCall("c", "t", {}))
    assert (outcome.status, outcome.result.content) == ("success", "a/b")


def test_a_failure_in_the_middle_does_not_stop_later_calls() -> None:
    ran: list[int] = []

    def work(x: int) -> int:
        ran.append(x)
        if x == 2:
            raise RuntimeError("two")
        return x * 10

    tools = {"t": _tool("t", work)}
    outcomes = run_calls(tools, [ToolCall(str(i), "t", {"x": i}) for i in (1, 2, 3)])
    assert ran == [1, 2, 3]
    assert [o.status for o in outcomes] == ["success", "failure", "success"]
    assert [o.result.content for o in outcomes] == [10, "RuntimeError: two", 30]
    assert [o.call.id for o in outcomes] == ["1", "2", "3"]


def test_accounting_sizes_are_utf8_bytes() -> None:
    outcome = run_call({"t": _tool("t", lambda **_: "é")}, ToolCall("c", "t", {"x": 1}))
    assert (outcome.args_bytes, outcome.result_bytes) == (len(b'{"x": 1}'), 2)


# ---------------------------------------------------------------- built-ins


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "notes" / "sub").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("# Alpha\nfirst LINE\n", encoding="utf-8")
    (root / "notes" / "sub" / "b.md").write_text("# Beta\nno match here\n", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("secret line\n", encoding="utf-8")
    (root / "bin.dat").write_bytes(b"\xff\xfeline\x00")
    return root


@pytest.fixture
def builtins(workspace: Path) -> Any:
    specs = [
        _spec(name, f"builtin:{name}")
        for name in ("read_file", "write_file", "list_dir", "search_text")
    ]
    return build_registry(specs, workspace=workspace)


def _run(registry: Any, tool: str, **args: Any) -> Any:
    return run_call(registry, ToolCall("c", tool, args))


def test_read_file(builtins: Any) -> None:
    assert _run(builtins, "read_file", path="notes/a.md").result.content == "# Alpha\nfirst LINE\n"
    missing = _run(builtins, "read_file", path="notes/none.md")
    assert missing.status == "failure" and "no file" in missing.result.content


def test_write_file_creates_folders_and_replaces_atomically(builtins: Any, workspace: Path) -> None:
    outcome = _run(builtins, "write_file", path="out/new/index.md", content="<b>é</b>\n")
    assert outcome.result.content == {"path": "out/new/index.md", "bytes": 10}
    assert (workspace / "out/new/index.md").read_text("utf-8") == "<b>é</b>\n"
    _run(builtins, "write_file", path="out/new/index.md", content="v2")
    assert (workspace / "out/new/index.md").read_text("utf-8") == "v2"
    assert [p.name for p in (workspace / "out/new").iterdir()] == ["index.md"]  # no temp left


def test_list_dir_hides_hidden_entries_and_sorts(builtins: Any) -> None:
    assert _run(builtins, "list_dir").result.content == ["bin.dat", "notes/"]
    recursive = _run(builtins, "list_dir", path="notes", recursive=True).result.content
    assert recursive == ["notes/a.md", "notes/sub/b.md"]  # recursive: files only
    assert _run(builtins, "list_dir", path="nope").status == "failure"


def test_search_text_is_case_insensitive_and_skips_binary_and_hidden(builtins: Any) -> None:
    hits = _run(builtins, "search_text", query="line").result.content
    assert hits == [{"path": "notes/a.md", "line": 2, "text": "first LINE"}]
    assert _run(builtins, "search_text", query="#", max_results=1).result.content == [
        {"path": "notes/a.md", "line": 1, "text": "# Alpha"}
    ]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": ".git/config"}),
        ("read_file", {"path": "notes"}),
        ("write_file", {"path": "../escape.md", "content": "x"}),
        ("write_file", {"path": ".toolwire/x.md", "content": "x"}),
        ("list_dir", {"path": ".."}),
        ("list_dir", {"path": ".git"}),
        ("search_text", {"query": "secret", "path": "../"}),
    ],
)
def test_paths_stay_inside_the_workspace(
    builtins: Any, workspace: Path, tool: str, args: dict[str, Any]
) -> None:
    outcome = _run(builtins, tool, **args)
    assert outcome.status == "failure"
    assert not (workspace.parent / "escape.md").exists()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_out_of_the_workspace_are_refused(
    builtins: Any, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret\n", encoding="utf-8")
    (workspace / "link.md").symlink_to(outside / "secret.md")
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    assert _run(builtins, "read_file", path="link.md").status == "failure"
    assert _run(builtins, "write_file", path="linkdir/new.md", content="x").status == "failure"
    assert _run(builtins, "list_dir", path="linkdir").status == "failure"
    assert "link.md" not in _run(builtins, "list_dir").result.content
    assert not (outside / "new.md").exists()
    assert _run(builtins, "search_text", query="secret").result.content == []


def test_check_args_reports_nested_required_and_extra_keys() -> None:
    from toolwire.arguments import check_args

    schema = {
        "type": "object",
        "properties": {
            "meta": {
                "type": "object",
                "properties": {"x": {"type": "string"}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
    }
    assert [p.arg for p in check_args({"meta": {}}, schema)] == ["meta"]
    assert [p.arg for p in check_args({"meta": {"x": "a", "y": 1}}, schema)] == ["meta"]
    assert check_args({"meta": {"x": "a"}}, schema) == []
