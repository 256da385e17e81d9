"""The final report quotes the last tool results; the first call's tool is chosen apart (issue 32).

``agent.quotes``: the system writes the quotes, beside the model's words,
never into them. ``agent.first_tool``: the side request that picks the first
call's tool lists the tools, one example per built-in the spec has, and the
task last; its grammar admits the tool names only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.agent.first_tool import EXAMPLES, choice_request, read_choice
from toolwire.agent.grammar_tools import grammar_tools
from toolwire.agent.quotes import MAX_QUOTED, QUOTE_CHARS, quoted_text, with_quotes
from toolwire.domain import FinalReport, ToolCall, ToolResult
from toolwire.spec.model import ToolSpec
from toolwire.tools import build_registry
from toolwire.tools.executor import ToolOutcome

pytestmark = pytest.mark.unit


def _outcome(
    tool: str, args: dict[str, object], content: object, status: str = "success"
) -> ToolOutcome:
    call = ToolCall("c", tool, dict(args))
    result = ToolResult("c", tool, "success" if status == "success" else "failure", content)
    return ToolOutcome(call, result, status, None, 0, 0)


def test_the_report_quotes_the_last_successful_results_beside_the_models_words() -> None:
    report = FinalReport("success", "text", "The task was completed successfully.")
    outcomes = [
        _outcome("list_dir", {"path": "."}, ["a/", "b.txt"]),
        _outcome("read_file", {"path": "gone.txt"}, "no such file", status="failure"),
        _outcome("read_file", {"path": "b.txt"}, "version 9.1\n"),
    ]
    quoted = with_quotes(report, outcomes)
    assert quoted.content == report.content  # the model's words stay its own
    assert quoted.metadata["tool_results"] == [
        '- list_dir {"path": "."} -> 2 items: ["a/", "b.txt"]',
        '- read_file {"path": "b.txt"} -> version 9.1',
    ]
    text = quoted_text(quoted)
    assert text.startswith("The task was completed successfully.\n\nTool results (quoted")
    assert "no such file" not in text


def test_quotes_are_bounded() -> None:
    outcomes = [_outcome("read_file", {"path": f"{i}.txt"}, "x" * 5000) for i in range(9)]
    lines = with_quotes(FinalReport("success", "text", "done"), outcomes).metadata["tool_results"]
    assert len(lines) == MAX_QUOTED and lines[0].startswith('- read_file {"path": "6.txt"}')
    assert all(len(line) < QUOTE_CHARS + 60 for line in lines)
    untouched = FinalReport("success", "json", {"k": 1})
    assert with_quotes(untouched, []) is untouched


def _tools(root: Path, names: tuple[str, ...]) -> list[object]:
    specs = [
        ToolSpec(name=n, description=f"does {n}", implementation=f"builtin:{n}") for n in names
    ]
    return build_registry(specs, workspace=root).tools  # type: ignore[return-value]


def test_the_side_request_lists_the_tools_then_the_task_and_admits_names_only(
    tmp_path: Path,
) -> None:
    declared = _tools(tmp_path, ("read_file", "write_file"))
    shaped = grammar_tools(declared, tmp_path)
    request = choice_request(shaped, declared, "Put the word owl in birds.txt.", temperature=0.0)
    assert request is not None
    system, user = (m["content"] for m in request.messages)
    assert "read_file: does read_file" in system and "write_file: does write_file" in system
    # Examples for the built-ins the spec has, none for the others (list_dir, search_text).
    assert system.count("Task: ") == 2 and "music" not in system and "Oslo" not in system
    assert user == "Task: Put the word owl in birds.txt.\nTool:"
    assert request.grammar == 'root ::= "read_file" | "write_file"\n'
    assert read_choice("write_file", shaped).name == "write_file"
    assert read_choice("delete_all", shaped) is None


def test_nothing_to_choose_means_no_side_request(tmp_path: Path) -> None:
    declared = _tools(tmp_path, ("read_file",))
    assert choice_request(grammar_tools(declared, tmp_path), declared, "x", temperature=0) is None


def test_example_words_are_not_the_suites() -> None:
    """The examples must not carry a task's values (bench/agent_tasks.py)."""
    from bench.agent_tasks import TASKS

    words = {w.strip(".?,").lower() for task, _ in EXAMPLES for w in task.split()}
    for task in TASKS:
        values = set(task.files) | {p.split("/")[0] for p in task.files}
        assert not {v.lower() for v in values} & words, task.name


def test_the_task_is_restated_last_once() -> None:
    """A small model reads what comes last: the task follows results and XML-NEXT."""
    from toolwire.agent.loop import _task_last

    goal = "Put the word owl in birds.txt."
    opening = [{"role": "system", "content": "s"}, {"role": "user", "content": f"Task: {goal}"}]
    assert _task_last(opening, goal) == opening
    later = [*opening, {"role": "assistant", "content": "call"}, {"role": "user", "content": "r"}]
    assert _task_last(later, goal)[-1]["content"] == f"r\n\nTask: {goal}"
    assert later[-1]["content"] == "r"  # the history itself is unchanged
    tool_reply = [*opening, {"role": "tool", "content": "r"}]
    assert _task_last(tool_reply, goal) == tool_reply
