"""Where a run may write: new files, and files the goal asks to change; never its inputs.

A goal that names files names two kinds: what to read ("Read city.txt") and what to
write ("... into answer.txt"). Offered every named path, SmolLM2-135M overwrote the
file it was told to read and the run ended ``ok`` (issue 46). The rule, one for every
transport (the loop checks each ``write_file`` call before it runs; under a grammar,
``agent.grammar_tools`` offers only the allowed names):

* a path that does not exist is a new file: allowed;
* a file this run created: allowed (the run may rewrite its own output);
* an existing file the goal names after a *change* word (write, update, append,
  save ... to/into): allowed;
* any other existing file (named after a *read* word, or not named at all): refused
  with ``WRITE_TARGET_REFUSED``, a result the model reads, and the file is untouched.

The words are English and few; a path nearest after none of them counts as read,
so an unclear goal protects the file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire.agent.grammar_tools import named_paths
from toolwire.domain import ToolCall, ToolResult
from toolwire.errors import ToolwireError
from toolwire.files.paths import normalize_rel_path
from toolwire.tools.executor import ToolOutcome

__all__ = ["WRITE_TARGET_REFUSED", "WriteTargets", "change_targets"]

WRITE_TARGET_REFUSED = "WRITE_TARGET_REFUSED"
_WRITE_TOOLS = frozenset({"builtin:write_file"})
_CHANGE = frozenset(
    "write writes create save store put update append add edit change modify replace "
    "overwrite rewrite fix correct fill insert record rename set to into onto".split()
)
_READ = frozenset(
    "read reads open look see check find search count list summarize summarise use "
    "using copy compare from what which does say says says tell according".split()
)
_WORD = re.compile(r"[A-Za-z]+")
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)")


def _marker(before: str) -> str | None:
    """The change/read word nearest before a path, within its sentence."""
    ends = list(_SENTENCE_END.finditer(before))
    clause = before[ends[-1].end() :] if ends else before
    for word in reversed(_WORD.findall(clause.lower())):
        if word in _CHANGE:
            return "change"
        if word in _READ:
            return "read"
    return None


def change_targets(goal: str) -> set[str]:
    """The named paths the goal asks to change (each occurrence judged by its words)."""
    found: set[str] = set()
    for path in named_paths(goal):
        for match in re.finditer(re.escape(path), goal):
            if _marker(goal[: match.start()]) == "change":
                found.add(path)
    return found


@dataclass
class WriteTargets:
    """The write rule for one run: its goal's change targets, and what it created."""

    root: Path
    goal: str
    created: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.change = change_targets(self.goal)

    def _exists(self, rel: str) -> bool:
        return os.path.lexists(self.root / rel)

    def allows(self, path: str) -> bool:
        """Whether the run may write ``path`` (workspace-relative)."""
        try:
            rel = normalize_rel_path(path)
        except ToolwireError:
            return True  # the tool refuses it with its own message
        return rel in self.change or rel in self.created or not self._exists(rel)

    def writable_names(self) -> list[str]:
        """The goal's named paths a write may target now (for the grammar's enum)."""
        return [p for p in named_paths(self.goal) if self.allows(p)]

    def refusal(self, call: ToolCall, tools: Mapping[str, Any]) -> ToolOutcome | None:
        """The refused outcome of a write the rule forbids, else None (the call runs)."""
        tool = tools.get(call.tool)
        path = call.args.get("path") if isinstance(call.args, dict) else None
        if getattr(tool, "implementation", "") not in _WRITE_TOOLS or not isinstance(path, str):
            return None
        if self.allows(path):
            if not self._exists(_normal(path)):
                self.created.add(_normal(path))  # a new file: the run's own from now on
            return None
        text = (
            f"{WRITE_TARGET_REFUSED}: {path} is an input of the task, not one it asks to "
            "change; leave it as it is and write the result to a new file or to the file "
            "the task names for it."
        )
        result = ToolResult(call_id=call.id, tool=call.tool, status="failure", content=text)
        return ToolOutcome(
            call=call,
            result=result,
            status="invalid",
            error=f"{WRITE_TARGET_REFUSED}: {path}",
            args_bytes=len(json.dumps(call.args, ensure_ascii=False, default=str).encode()),
            result_bytes=len(text.encode("utf-8")),
        )


def _normal(path: str) -> str:
    try:
        return normalize_rel_path(path)
    except ToolwireError:
        return path
