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

Only the grammar sees these views; the prompt shows the tools as declared.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from toolwire.errors import ToolwireError
from toolwire.files.confined import Confined

__all__ = ["MAX_PATHS", "ToolView", "grammar_tools", "visible_paths"]

MAX_PATHS = 200  # beyond this an enum costs more than it guides
_FILE_PATH_TOOLS = frozenset({"builtin:read_file"})
_FOLDER_PATH_TOOLS = frozenset({"builtin:list_dir", "builtin:search_text"})


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


def _narrowed(tool: Any, paths: tuple[list[str], list[str]] | None) -> dict[str, Any]:
    args = dict(tool.args)
    props = args.get("properties")
    if paths is None or not isinstance(props, dict) or "path" not in props:
        return args
    files, folders = paths
    implementation = getattr(tool, "implementation", "")
    choices = (
        files
        if implementation in _FILE_PATH_TOOLS
        else folders
        if implementation in _FOLDER_PATH_TOOLS
        else None
    )
    if not choices:
        return args
    return {**args, "properties": {**props, "path": {**props["path"], "enum": choices}}}


def grammar_tools(
    tools: Sequence[Any], root: Path | None, *, exclude: Collection[str] = ()
) -> list[ToolView]:
    """``tools`` as the next request's grammar should shape them."""
    paths = visible_paths(root) if root is not None else None
    kept = [t for t in tools if t.name not in exclude] or list(tools)
    return [ToolView(t.name, t.description, _narrowed(t, paths)) for t in kept]
