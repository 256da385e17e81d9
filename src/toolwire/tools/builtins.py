"""Built-in tools, each confined to one workspace folder.

Paths come from the model, so every one goes through the same gate as the librarian's
(:func:`toolwire.files.paths.normalize_rel_path` and
:func:`~toolwire.files.paths.resolve_inside`): no ``..``, no absolute
path, no symlink out of the folder, nothing in hidden folders (``.git``,
``.toolwire``). The reads and writes themselves then go through
:class:`~toolwire.files.confined.Confined` (folder descriptors, no link
followed), so a folder swapped for a symlink between the check and the write
cannot send the write out of the workspace. A tool signals a failure the
model should read by raising :class:`ToolFailed`; the executor turns it (and
any other exception) into a failure result.

Each built-in has a default argument schema, used when the spec declares the
tool without ``args``; a spec that does declare them may only use names the
built-in understands (checked when the registry is built).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolwire.errors import ToolwireError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path, resolve_inside
from toolwire.files.write_blocker import write_blocker

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


def _resolve_dir(root: Path, rel: Any) -> str:
    """A folder inside ``root`` as a relative path; ``""`` and ``"."`` name the workspace."""
    if rel is None or (isinstance(rel, str) and rel.strip() in ("", ".", "./")):
        return ""
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
    return clean


def _visible(fs: Confined, rel: str) -> str | None:
    """``"file"``/``"dir"`` for an entry the tools may show, else None.

    A link is shown only when it lands inside the workspace, outside hidden
    folders, on a regular file: a link ``peek.md -> .git/config`` must not let
    search_text read what read_file refuses.
    """
    try:
        st = fs.lstat(rel)
        if st is not None and stat.S_ISLNK(st.st_mode):
            st = fs.lstat(fs.resolve_link(rel))
            return "file" if st is not None and stat.S_ISREG(st.st_mode) else None
    except WorkspaceError:
        return None
    if st is None:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "file" if stat.S_ISREG(st.st_mode) else None


def _visible_files(fs: Confined, start: str, *, recursive: bool) -> list[tuple[str, str]]:
    """(relative path, "file"|"dir") under ``start``, hidden entries skipped, sorted."""
    prefix = f"{start}/" if start else ""
    names: list[str] = []
    try:
        if recursive:
            # The workspace's one bounded walker (no recursion, depth and size capped).
            for here, dirs, files, _ in fs.walk(start):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                sub = here[len(start) :].lstrip("/") + "/" if here != start else ""
                names += [f"{prefix}{sub}{f}" for f in files if not f.startswith(".")]
        else:
            names = [f"{prefix}{n}" for n in fs.listdir(start) if not n.startswith(".")]
    except (OSError, WorkspaceError) as exc:
        raise ToolFailed(f"cannot list {start or '.'!r}: {getattr(exc, 'message', exc)}") from None
    found = [(rel, _visible(fs, rel)) for rel in sorted(names)]
    return [(rel, kind) for rel, kind in found if kind is not None]


def read_file(root: Path, path: str) -> str:
    """The text of one file (UTF-8; undecodable bytes replaced)."""
    target = _resolve_file(root, path)
    try:
        with Confined(root) as fs:
            # Non-blocking open + fstat: a fifo swapped in after the check is refused, not read.
            data = fs.read_bytes(target.relative_to(root).as_posix(), limit=MAX_READ_BYTES,
                                 follow_inside=True)  # fmt: skip
    except WorkspaceError as exc:
        raise ToolFailed(f"cannot read {path!r}: {exc.message}") from None
    except OSError as exc:
        raise ToolFailed(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if data is None:
        raise ToolFailed(f"no file {path!r} in the workspace")
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
    rel = target.relative_to(root).as_posix()
    try:
        with Confined(root) as fs:
            # A link to another file of the workspace is written at its target, as an
            # editor would; every folder on the way is opened without following links.
            target_rel = fs.resolve_link(rel)
            # The user's chmod -w is a "leave it" for the model too (root could write).
            if why := write_blocker(fs, target_rel):
                raise ToolFailed(f"cannot write {path!r}: {why}")
            fs.write_atomic(target_rel, data, make_parents=True)
    except WorkspaceError as exc:
        raise ToolFailed(f"cannot write {path!r}: {exc.message}") from None
    except OSError as exc:
        raise ToolFailed(f"cannot write {path!r}: {exc.strerror or exc}") from None
    return {"path": normalize_rel_path(path), "bytes": len(data)}


def list_dir(root: Path, path: str = ".", recursive: bool = False) -> list[str]:
    """Entries of a folder, relative to the workspace, sorted; folders end with ``/``.

    ``recursive`` lists every file below the folder instead (files only: the paths
    already show the folders).
    """
    folder = _resolve_dir(root, path)
    with Confined(root) as fs:
        found = _visible_files(fs, folder, recursive=bool(recursive))
    entries = sorted(rel + ("/" if kind == "dir" else "") for rel, kind in found)
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
    with Confined(root) as fs:
        for rel, kind in _visible_files(fs, folder, recursive=True):
            if kind != "file":
                continue
            try:
                data = fs.read_bytes(rel, limit=MAX_SEARCH_FILE_BYTES, follow_inside=True)
            except (OSError, WorkspaceError):
                continue  # gone, unreadable or swapped for something else since the listing
            if data is None or len(data) > MAX_SEARCH_FILE_BYTES:
                continue  # too big to search
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # binary or not UTF-8: not text to search
            for number, line in enumerate(text.splitlines(), start=1):
                if needle in line.casefold():
                    hits.append({"path": rel, "line": number, "text": line.strip()[:200]})
                    if len(hits) >= max_results:
                        return hits
    return hits


_PATH = {
    "type": "string",
    "description": "file path relative to the workspace, as list_dir shows it",
}
_FOLDER = {"type": "string", "description": "folder relative to the workspace; . is the top"}

BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "object",
        "properties": {"path": _PATH},
        "required": ["path"],
        "additionalProperties": False,
    },
    "write_file": {
        "type": "object",
        "properties": {"path": _PATH, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
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
        "additionalProperties": False,
    },
    "search_text": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "path": _FOLDER,
            "max_results": {"type": "integer", "minimum": 1, "maximum": 200},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}

BUILTINS: dict[str, Callable[..., Any]] = {
    "read_file": read_file,
    "write_file": write_file,
    "list_dir": list_dir,
    "search_text": search_text,
}
