"""A bounded top-down walk of an open folder that never follows a link.

Like ``os.fwalk`` (``dirs`` names the folders and the links to folders, which are
never entered), but with its own stack instead of recursion: ``os.fwalk`` recursed
once per level and a folder 1,100 levels deep raised ``RecursionError`` (issue #30
item 5). It is bounded too: folders deeper than ``max_depth`` are not entered and
the walk stops after ``max_entries`` names. At most ``max_depth + 1`` descriptors
are open at once (the current chain).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

__all__ = ["DIR_FLAGS", "MAX_WALK_DEPTH", "MAX_WALK_ENTRIES", "walk_folders"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# Bounds of one walk: a real vault is a few levels and thousands of files deep; a folder
# chain 1,100 levels deep or millions of names is an attack or an accident, not notes.
MAX_WALK_DEPTH = 64
MAX_WALK_ENTRIES = 500_000
# A listed name that is no folder to enter: a link (O_NOFOLLOW), or gone since listed.
_NOT_A_FOLDER = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENOENT})


def walk_folders(
    fd: int,
    base: str,
    *,
    max_depth: int = MAX_WALK_DEPTH,
    max_entries: int = MAX_WALK_ENTRIES,
    warnings: list[str] | None = None,
) -> Iterator[tuple[str, list[str], list[str], int]]:
    """(rel folder, dirs, files, fd) from the folder ``fd`` (named ``base``), top down.

    Takes ownership of ``fd``. Prune ``dirs`` in place as with ``os.walk``; names come
    sorted. Each bound reached adds a line to ``warnings``."""
    note = warnings.append if warnings is not None else (lambda _line: None)
    rel, depth, seen = base, 0, 0
    chain: list[tuple[str, int, int, Iterator[str]]] = []  # (rel, fd, depth, dirs to enter)
    current: int | None = fd
    try:
        while True:
            try:
                dirs, files = _entries(fd)
            except OSError as exc:
                # A listing can fail part-way (/proc, a network mount, EIO): the top folder
                # is the caller's error to report; below it, that folder is named and left.
                if rel == base:
                    raise
                note(f"skipped {rel}/: cannot list it ({exc.strerror or exc})")
                dirs, files = [], []
            seen += len(dirs) + len(files)
            if seen > max_entries:
                note(f"stopped reading folders after {max_entries} entries (at {rel or '.'}/)")
                return
            yield rel, dirs, files, fd
            chain.append((rel, fd, depth, iter(list(dirs))))
            current = None
            while chain:
                parent_rel, parent_fd, parent_depth, todo = chain[-1]
                name = next(todo, None)
                if name is None:
                    chain.pop()
                    os.close(parent_fd)
                    continue
                child = f"{parent_rel}/{name}" if parent_rel else name
                if parent_depth + 1 > max_depth:
                    note(f"skipped {child}/: deeper than {max_depth} folders")
                    continue
                try:  # O_NOFOLLOW: a link to a folder is listed, never entered
                    fd = current = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
                except OSError as exc:
                    # A link, or removed since it was listed: nothing to say. A folder
                    # that cannot be opened (chmod 000) hid its notes without a word.
                    if exc.errno not in _NOT_A_FOLDER:
                        note(f"skipped {child}/: {exc.strerror or exc}")
                    continue
                rel, depth = child, parent_depth + 1
                break
            else:
                return
    finally:
        if current is not None:
            os.close(current)
        for _, open_fd, _, _ in chain:
            os.close(open_fd)


def _entries(fd: int) -> tuple[list[str], list[str]]:
    """(folders, other names) of the open folder ``fd``, sorted; links to folders count
    as folders (as ``os.fwalk`` lists them), unreadable entries as files."""
    dirs: list[str] = []
    files: list[str] = []
    with os.scandir(fd) as listing:
        for entry in listing:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
    return sorted(dirs), sorted(files)
