"""What the grammar sees (issue 32: "constrain what can be constrained").

Under a grammar, a built-in's read path is limited to paths that exist, a tool
the loop guard just answered as a repeat is left out, and until a tool has run
the grammar admits calls only (a report grounded in nothing cannot be written).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from toolwire.agent.grammar_tools import (
    MAX_PATHS,
    grammar_tools,
    named_paths,
    note_had,
    visible_paths,
)
from toolwire.agent.transports.base import ending_only
from toolwire.agent.write_targets import WriteTargets
from toolwire.domain import ToolCall
from toolwire.protocols.execute.grammar import execute_grammar
from toolwire.protocols.native import tool_call_grammar
from toolwire.protocols.slots.grammar import slots_grammar
from toolwire.protocols.xct import xct_grammar
from toolwire.spec.model import ToolSpec
from toolwire.tools import build_registry


def _tools(root: Path) -> list[object]:
    specs = [
        ToolSpec(name=n, description=n, implementation=f"builtin:{n}")
        for n in ("list_dir", "read_file", "write_file", "search_text")
    ]
    return build_registry(specs, workspace=root).tools  # type: ignore[return-value]


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("x")
    return tmp_path


def test_read_paths_are_the_visible_files_and_folders(tmp_path: Path) -> None:
    views = {v.name: v for v in grammar_tools(_tools(_workspace(tmp_path)), tmp_path)}
    assert views["read_file"].args["properties"]["path"]["enum"] == ["b.txt", "docs/a.md"]
    assert views["list_dir"].args["properties"]["path"]["enum"] == [".", "docs"]
    assert views["search_text"].args["properties"]["path"]["enum"] == [".", "docs"]
    assert "enum" not in views["write_file"].args["properties"]["path"]  # new files too
    grammar = xct_grammar(list(views.values()))
    assert '"\\"docs/a.md\\""' in grammar and ".git" not in grammar


def test_too_many_paths_leave_the_path_free(tmp_path: Path) -> None:
    for i in range(MAX_PATHS + 1):
        (tmp_path / f"f{i}.txt").write_text("x")
    assert visible_paths(tmp_path) is None
    views = {v.name: v for v in grammar_tools(_tools(tmp_path), tmp_path)}
    assert "enum" not in views["read_file"].args["properties"]["path"]


def test_links_are_neither_offered_nor_followed(tmp_path: Path) -> None:
    """The paths come from the confined walk: a link to a folder outside, or to a file,
    is not a path the tools would use, so the grammar does not offer it."""
    outside = tmp_path / "outside"
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "key.txt").write_text("k")
    (tmp_path / "ws").mkdir()
    root = _workspace(tmp_path / "ws")
    (root / "out").symlink_to(outside / "secret")
    (root / "b-link.txt").symlink_to(root / "b.txt")
    assert visible_paths(root) == (["b.txt", "docs/a.md"], [".", "docs"])


def test_a_repeated_tool_is_left_out_but_never_all(tmp_path: Path) -> None:
    tools = _tools(_workspace(tmp_path))
    names = [v.name for v in grammar_tools(tools, tmp_path, exclude={"list_dir"})]
    assert names == ["read_file", "write_file", "search_text"]
    everything = {"list_dir", "read_file", "write_file", "search_text"}
    assert len(grammar_tools(tools, tmp_path, exclude=everything)) == 4


@pytest.mark.parametrize(
    ("build", "ending"),
    [
        (lambda t, last: xct_grammar(t, done=last), "done"),
        (lambda t, last: execute_grammar(t, answer=last), "answer"),
        (
            lambda t, last: slots_grammar(
                nonce="ai-agent-0123abcd",
                slots=["ai-agent-0123abcd-0001"],
                tools=t,
                allow_final=last,
            ),
            "final",
        ),
        (lambda t, last: tool_call_grammar(t, ending=last), "final-text"),
    ],
)
def test_until_a_tool_ran_the_grammar_admits_calls_only(
    tmp_path: Path, build: object, ending: str
) -> None:
    tools = grammar_tools(_tools(_workspace(tmp_path)), tmp_path)
    free = build(tools, True)  # type: ignore[operator]
    first = build(tools, False)  # type: ignore[operator]
    root_free = free.splitlines()[0]
    root_first = first.splitlines()[0]
    assert ending in root_free and ending not in root_first, (root_free, root_first)


def test_a_path_already_read_is_not_offered_again(tmp_path: Path) -> None:
    tools = _tools(_workspace(tmp_path))
    had = {("read_file", "b.txt"), ("list_dir", ".")}
    views = {v.name: v for v in grammar_tools(tools, tmp_path, had=had)}
    assert views["read_file"].args["properties"]["path"]["enum"] == ["docs/a.md"]
    assert views["list_dir"].args["properties"]["path"]["enum"] == ["docs"]
    assert views["search_text"].args["properties"]["path"]["enum"] == [".", "docs"]  # query
    had |= {("read_file", "docs/a.md")}
    assert "read_file" not in [v.name for v in grammar_tools(tools, tmp_path, had=had)]


def test_a_write_forgets_what_was_read(tmp_path: Path) -> None:
    tools = _tools(_workspace(tmp_path))
    had: set[tuple[str, str]] = set()
    read = ToolCall("1", "read_file", {"path": "b.txt"})
    note_had(had, tools, SimpleNamespace(call=read))
    note_had(had, tools, SimpleNamespace(call=ToolCall("2", "search_text", {"query": "b"})))
    assert had == {("read_file", "b.txt")}
    write = ToolCall("3", "write_file", {"path": "b.txt", "content": "new"})
    note_had(had, tools, SimpleNamespace(call=write))
    assert had == set()  # the file may have changed: reading it again is news


def test_writes_go_to_the_paths_the_goal_allows(tmp_path: Path) -> None:
    """Issue 46: the file the goal only reads is not offered to write_file."""
    tools = _tools(_workspace(tmp_path))
    goal = "Read b.txt, then put its first line into out/first.txt (not README)."
    writable = WriteTargets(tmp_path, goal).writable_names()
    views = {v.name: v for v in grammar_tools(tools, tmp_path, writable=writable)}
    assert views["write_file"].args["properties"]["path"]["enum"] == ["out/first.txt"]
    free = {v.name: v for v in grammar_tools(tools, tmp_path)}
    assert "enum" not in free["write_file"].args["properties"]["path"]
    assert named_paths("see ../up.txt and v4.2.7 and a/b.md.") == ["a/b.md"]


@pytest.mark.parametrize(
    ("build", "ending"),
    [
        (lambda t: xct_grammar(t), "done"),
        (lambda t: execute_grammar(t), "answer"),
        (
            lambda t: slots_grammar(
                nonce="ai-agent-0123abcd", slots=["ai-agent-0123abcd-0001"], tools=t
            ),
            "final",
        ),
    ],
)
def test_the_last_call_admits_the_ending_only(tmp_path: Path, build: object, ending: str) -> None:
    """A tool called on the run's last model call would return a result nobody reads."""
    grammar = build(grammar_tools(_tools(_workspace(tmp_path)), tmp_path))  # type: ignore[operator]
    narrowed = ending_only(grammar, ending)
    assert narrowed.splitlines()[0] == f"root ::= {ending}"
    assert narrowed.splitlines()[1:] == grammar.splitlines()[1:]
    with pytest.raises(ValueError, match="no-such-rule"):
        ending_only(grammar, "no-such-rule")
