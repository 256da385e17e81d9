"""Writes go where the task allows (issue 46): new files and files the goal asks to
change, never a file it only asks to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.agent.write_targets import WRITE_TARGET_REFUSED, WriteTargets, change_targets
from toolwire.domain import ToolCall
from toolwire.spec.model import ToolSpec
from toolwire.tools import build_registry

pytestmark = pytest.mark.unit

# (goal, the named paths it asks to change)
GOALS: list[tuple[str, set[str]]] = [
    ("Read city.txt and tell me the city.", set()),
    ("Read city.txt and write the city's name into answer.txt.", {"answer.txt"}),
    ("Write the file index.md at the top of the folder.", {"index.md"}),
    ("Update todo.md with the lines from new.md.", {"todo.md"}),
    ("Copy a.txt to b.txt.", {"b.txt"}),
    ("Count the lines in notes.md and save the number to count.txt.", {"count.txt"}),
    ("Fix the typo in README.md.", {"README.md"}),
    ("city.txt holds a name. Say it.", set()),
    ("Read a.txt, b.txt and c.txt, then append a summary to log.md.", {"log.md"}),
    ("What does plan.md say? Then write it down.", set()),
]


@pytest.mark.parametrize(("goal", "expected"), GOALS)
def test_the_goal_says_which_files_it_asks_to_change(goal: str, expected: set[str]) -> None:
    assert change_targets(goal) == expected


def _tools(root: Path):  # type: ignore[no-untyped-def]
    specs = [
        ToolSpec(name="read_file", description="r", implementation="builtin:read_file"),
        ToolSpec(name="write_file", description="w", implementation="builtin:write_file"),
    ]
    return build_registry(specs, workspace=root)


def test_an_input_is_refused_a_new_file_and_the_runs_own_are_not(tmp_path: Path) -> None:
    (tmp_path / "city.txt").write_text("Paris\n", encoding="utf-8")
    (tmp_path / "other.txt").write_text("x\n", encoding="utf-8")
    targets = WriteTargets(tmp_path, "Read city.txt and write the name into answer.txt.")
    tools = _tools(tmp_path)

    def write(path: str) -> ToolCall:
        return ToolCall("1", "write_file", {"path": path, "content": "Oslo"})

    for path in ("city.txt", "./city.txt", "other.txt"):  # the input; a file never named
        refused = targets.refusal(write(path), tools)
        assert refused is not None and refused.status == "invalid"
        assert refused.error == f"{WRITE_TARGET_REFUSED}: {path}"
        assert WRITE_TARGET_REFUSED in str(refused.result.content)
    assert targets.refusal(write("answer.txt"), tools) is None  # named to change
    assert targets.refusal(write("new/notes.md"), tools) is None  # a new file
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "notes.md").write_text("mine", encoding="utf-8")
    assert targets.refusal(write("new/notes.md"), tools) is None  # the run's own file now
    assert targets.refusal(ToolCall("2", "read_file", {"path": "city.txt"}), tools) is None
    assert targets.writable_names() == ["answer.txt"]
