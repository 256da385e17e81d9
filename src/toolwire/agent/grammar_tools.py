"""The tools as a grammar sees them: paths that exist, and no tool the model just repeated.

Under a grammar (constrained local decoding) a tool's arguments already follow
its JSON Schema. Two generic narrowings make a small model's calls land:

* **paths that exist**: the ``path`` a built-in reads (``read_file``: files;
  ``list_dir`` and ``search_text``: folders, ``.`` included) is an enum of the
  workspace's visible paths when there are at most ``MAX_PATHS`` of them, read
  afresh before every request (a file written in the run can be read next).
  ``write_file`` keeps a free path: it makes new files. The executor still
  checks every call against the real schema.
* **no tool that was just repeated**: a tool whose last call the loop guard
  answered as a repeat is left out of the next request's grammar, so a model
  stuck on one call (SmolLM2 lists the same folder until the run ends) has to
  take another step or finish. Never all tools: then none is left out.
* **no read the model already has**: a path ``list_dir`` or ``read_file``
  has already returned (since the last call that may have changed the
  workspace) is not offered again to that tool; a tool with no path left is
  left out. The prompt says "never repeat a call whose result you
  already have"; the grammar makes it so.
* **writes go where the task allows**: when the goal names files it may write
  (``agent.write_targets``: new files and files it asks to change, never one it
  only asks to read), ``write_file``'s ``path`` is an enum of those names: the
  model copies a name from its task instead of inventing one or overwriting its
  input. Otherwise the path is free (the loop still refuses a forbidden write).

Only the grammar sees these views; the prompt shows the tools as declared.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from toolwire.errors import ToolwireError
from toolwire.files.confined import Confined

__all__ = ["MAX_PATHS", "ToolView", "grammar_tools", "named_paths", "note_had", "visible_paths"]

MAX_PATHS = 200  # beyond this an enum costs more than it guides
_FILE_PATH_TOOLS = frozenset({"builtin:read_file"})
_FOLDER_PATH_TOOLS = frozenset({"builtin:list_dir", "builtin:search_text"})
_READ_ONLY = _FILE_PATH_TOOLS | _FOLDER_PATH_TOOLS
_WRITE_PATH_TOOLS = frozenset({"builtin:write_file"})
# Tools whose result the path alone decides (a search also depends on its query).
_PATH_DECIDES = frozenset({"builtin:read_file", "builtin:list_dir"})
# A relative file path as a task writes it: segments, then a dot and a letter-led extension.
_NAMED_PATH = re.compile(r"(?<![\w./-])(?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/-])")


@dataclass(frozen=True)
class ToolView:
    """What grammar builders read of a tool: ``name``, ``description``, ``args``."""

    name: str
    description: str
    args: dict[str, Any]


def visible_paths(root: Path) -> tuple[list[str], list[str]] | None:
    """(files, folders) of the workspace through the confined walk: hidden ones skipped,
    links neither followed nor offered (the tools refuse them); None when there are more
    than ``MAX_PATHS`` or the folder cannot be walked."""
    files: list[str] = []
    folders: list[str] = ["."]
    try:
        with Confined(root) as workspace, closing(workspace.walk()) as walk:
            for rel, dirs, names, fd in walk:
                prefix = f"{rel}/" if rel else ""
                dirs[:] = [d for d in dirs if not d.startswith(".") and _is(fd, d, S_ISDIR)]
                folders += [f"{prefix}{d}" for d in dirs]
                files += [
                    f"{prefix}{n}" for n in names if not n.startswith(".") and _is(fd, n, S_ISREG)
                ]
                if len(files) + len(folders) > MAX_PATHS:
                    return None
    except (OSError, ToolwireError):
        return None
    return files, folders


def _is(folder_fd: int, name: str, kind: Callable[[int], bool]) -> bool:
    """Whether ``name`` in the open folder is of ``kind`` itself (a link is a link)."""
    try:
        return kind(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def named_paths(goal: str) -> list[str]:
    """File paths the goal names, in order, each once (``docs/a.md``, ``out.txt``)."""
    found = (m.group(0) for m in _NAMED_PATH.finditer(goal))
    return list(dict.fromkeys(p for p in found if ".." not in p.split("/")))


def note_had(had: set[tuple[str, str]], tools: Sequence[Any], outcome: Any) -> None:
    """Record a successful call in ``had``: a read's (tool, path), or forget every read
    after a call that may have changed the workspace."""
    tool = next((t for t in tools if t.name == outcome.call.tool), None)
    if tool is None or getattr(tool, "implementation", "") not in _READ_ONLY:
        had.clear()
        return
    if tool.implementation in _PATH_DECIDES and isinstance(outcome.call.args, dict):
        had.add((tool.name, str(outcome.call.args.get("path", "."))))


def _narrowed(
    tool: Any,
    paths: tuple[list[str], list[str]] | None,
    had: Collection[tuple[str, str]],
    named: Sequence[str],
) -> dict[str, Any] | None:
    """The tool's arguments as the grammar sees them; None: leave the tool out."""
    args = dict(tool.args)
    props = args.get("properties")
    if paths is None or not isinstance(props, dict) or "path" not in props:
        return args
    files, folders = paths
    implementation = getattr(tool, "implementation", "")
    if implementation in _WRITE_PATH_TOOLS:
        choices = list(named) or None
    elif implementation in _FILE_PATH_TOOLS:
        choices = files
    elif implementation in _FOLDER_PATH_TOOLS:
        choices = folders
    else:
        choices = None
    if not choices:
        return args
    if implementation in _PATH_DECIDES:
        choices = [c for c in choices if (tool.name, c) not in had]
        if not choices:
            return None
    return {**args, "properties": {**props, "path": {**props["path"], "enum": choices}}}


def grammar_tools(
    tools: Sequence[Any],
    root: Path | None,
    *,
    exclude: Collection[str] = (),
    had: Collection[tuple[str, str]] = (),
    writable: Sequence[str] = (),
) -> list[ToolView]:
    """``tools`` as the next request's grammar should shape them (never none of them);
    ``writable``: the paths a write may target (``agent.write_targets``)."""
    paths = visible_paths(root) if root is not None else None
    named = list(writable)
    views = []
    for tool in tools:
        if tool.name in exclude:
            continue
        args = _narrowed(tool, paths, had, named)
        if args is not None:
            views.append(ToolView(tool.name, tool.description, args))
    if views:
        return views
    # Every tool was left out: offer them all rather than none.
    return [
        ToolView(t.name, t.description, _narrowed(t, paths, (), named) or t.args) for t in tools
    ]
