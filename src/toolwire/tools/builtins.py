"""Built-in tools, each confined to one workspace folder.

Paths come from the model, so every one goes through the librarian's gate
(:func:`toolwire.librarian.workspace.normalize_rel_path` and
:func:`~toolwire.librarian.workspace.resolve_inside`): no ``..``, no absolute
path, no symlink out of the folder, nothing in hidden folders (``.git``,
``.toolwire``). A tool signals a failure the model should read by raising
:class:`ToolFailed`; the executor turns it (and any other exception) into a
failure result.

Each built-in has a default argument schema, used when the spec declares the
tool without ``args``; a spec that does declare them may only use names the
built-in understands (checked when the registry is built).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolwire.errors import ToolwireError, WorkspaceError
from toolwire.librarian.workspace import normalize_rel_path, read_regular_file, resolve_inside

__all__ = [
    "BUILTINS",
    "BUILTIN_SCHEMAS",
    "MAX_READ_BYTES",
    "ToolFailed",
    "list_dir",
    "read_file",
    "search_text",
    "write_file",
]

TOOL_FAILED = "TOOL_FAILED"
MAX_READ_BYTES = 256 * 1024  # a bigger file would not fit any context window anyway
MAX_WRITE_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 500
MAX_SEARCH_FILE_BYTES = 1024 * 1024


class ToolFailed(ToolwireError):
    """A tool could not do what was asked; ``message`` is written for the model."""

    code = TOOL_FAILED


def _resolve_file(root: Path, rel: Any) -> Path:
    if not isinstance(rel, str):
        raise ToolFailed("path must be a string")
    try:
        return resolve_inside(root, rel)
    except WorkspaceError as exc:
        raise ToolFailed(exc.message) from None


def _resolve_dir(root: Path, rel: Any) -> Path:
    """A folder inside ``root``; ``""`` and ``"."`` name the workspace itself."""
    if rel is None or (isinstance(rel, str) and rel.strip() in ("", ".", "./")):
        return root
    if not isinstance(rel, str):
        raise ToolFailed("path must be a string")
    try:
        clean = normalize_rel_path(rel.rstrip("/") or ".")
    except WorkspaceError as exc:
        raise ToolFailed(exc.message) from None
    candidate = root.joinpath(*clean.split("/"))
    real = Path(os.path.realpath(candidate))
    if not real.is_relative_to(root) or any(
        part.startswith(".") for part in real.relative_to(root).parts
    ):
        raise ToolFailed(f"folder {rel!r} is outside the workspace")
    if not real.is_dir():
        raise ToolFailed(f"no folder {rel!r} in the workspace")
    return candidate


def _visible_files(root: Path, start: Path, *, recursive: bool) -> list[Path]:
    """Regular files under ``start`` (not in hidden folders, no symlinks out), sorted."""
    found: list[Path] = []
    if recursive:
        for folder, dirs, files in os.walk(start):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [Path(folder) / f for f in sorted(files) if not f.startswith(".")]
    else:
        found = sorted(p for p in start.iterdir() if not p.name.startswith("."))
    return [path for path in found if _stays_visible(root, path)]


def _stays_visible(root: Path, path: Path) -> bool:
    """Whether ``path`` (possibly a symlink) lands on a folder or regular file that
    the tools may show: inside ``root`` and not in a hidden folder. A link
    ``peek.md -> .git/config`` must not let search_text read what read_file refuses."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root) or any(
        part.startswith(".") for part in real.relative_to(root).parts
    ):
        return False
    return real.is_dir() or real.is_file()


def read_file(root: Path, path: str) -> str:
    """The text of one file (UTF-8; undecodable bytes replaced)."""
    target = _resolve_file(root, path)
    try:
        # Non-blocking open + fstat: a fifo swapped in after the check is refused, not read.
        data = read_regular_file(target, MAX_READ_BYTES)
    except FileNotFoundError:
        raise ToolFailed(f"no file {path!r} in the workspace") from None
    except OSError as exc:
        raise ToolFailed(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if data is None:
        raise ToolFailed(f"path {path!r} is a special file (fifo, socket or device)")
    if len(data) > MAX_READ_BYTES:
        raise ToolFailed(f"file {path!r} is over {MAX_READ_BYTES} bytes, the limit")
    return data.decode("utf-8", errors="replace")


def write_file(root: Path, path: str, content: str) -> dict[str, Any]:
    """Create or replace one file atomically (temp file, fsync, rename); folders are created."""
    target = _resolve_file(root, path)
    if not isinstance(content, str):
        raise ToolFailed("content must be a string")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolFailed(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # resolve_inside checked the parents; re-check now that they exist (a race would
    # need someone else writing symlinks into the workspace while the tool runs).
    _resolve_file(root, path)
    fd, tmp = tempfile.mkstemp(prefix=".toolwire-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {"path": normalize_rel_path(path), "bytes": len(data)}


def list_dir(root: Path, path: str = ".", recursive: bool = False) -> list[str]:
    """Entries of a folder, relative to the workspace, sorted; folders end with ``/``.

    ``recursive`` lists every file below the folder instead (files only: the paths
    already show the folders).
    """
    folder = _resolve_dir(root, path)
    entries = sorted(
        item.relative_to(root).as_posix() + ("/" if item.is_dir() else "")
        for item in _visible_files(root, folder, recursive=bool(recursive))
    )
    if len(entries) > MAX_LIST_ENTRIES:
        extra = len(entries) - MAX_LIST_ENTRIES
        entries = entries[:MAX_LIST_ENTRIES] + [f"... ({extra} more)"]
    return entries


def search_text(
    root: Path, query: str, path: str = ".", max_results: int = 20
) -> list[dict[str, Any]]:
    """Lines containing ``query`` (case-insensitive) in the text files under ``path``."""
    if not isinstance(query, str) or not query.strip():
        raise ToolFailed("query must be a non-empty string")
    folder = _resolve_dir(root, path)
    needle = query.casefold()
    hits: list[dict[str, Any]] = []
    for file in _visible_files(root, folder, recursive=True):
        try:
            data = read_regular_file(file, MAX_SEARCH_FILE_BYTES)
        except OSError:
            continue  # gone or unreadable since the listing
        if data is None or len(data) > MAX_SEARCH_FILE_BYTES:
            continue  # a fifo or device, or too big to search
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # binary or not UTF-8: not text to search
        for number, line in enumerate(text.splitlines(), start=1):
            if needle in line.casefold():
                rel = file.relative_to(root).as_posix()
                hits.append({"path": rel, "line": number, "text": line.strip()[:200]})
                if len(hits) >= max_results:
                    return hits
    return hits


_PATH = {"type": "string", "description": "path relative to the workspace, e.g. notes/a.md"}
_FOLDER = {"type": "string", "description": "folder relative to the workspace; . is the top"}

BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "object",
        "properties": {"path": _PATH},
        "required": ["path"],
    },
    "write_file": {
        "type": "object",
        "properties": {"path": _PATH, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "list_dir": {
        "type": "object",
        "properties": {
            "path": _FOLDER,
            "recursive": {
                "type": "boolean",
                "description": "list every file below, sub-folders too",
            },
        },
    },
    "search_text": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "path": _FOLDER,
            "max_results": {"type": "integer", "minimum": 1, "maximum": 200},
        },
        "required": ["query"],
    },
}

BUILTINS: dict[str, Callable[..., Any]] = {
    "read_file": read_file,
    "write_file": write_file,
    "list_dir": list_dir,
    "search_text": search_text,
}
