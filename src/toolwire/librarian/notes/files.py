"""Which files of a workspace are notes: the spec's ``notes.include`` / ``notes.exclude``.

Patterns are gitignore-style globs relative to the workspace (pathspec's
``GitIgnoreSpec`` on its RE2 backend: linear in the name, whatever the glob; the rules
users already know from ``.gitignore``): ``*.md``
matches at any depth, ``Templates/`` matches a folder of that name anywhere,
``/Inbox/`` only at the top, ``**`` spans folders. A file is a note when an
include pattern matches it and no exclude pattern does; an excluded folder is
not even entered. Excluded files are never read, never shown to a model and
never written (a create into an excluded path is refused).

The defaults skip what an Obsidian-style vault keeps beside its notes:
settings (``.obsidian/``), templates, daily notes (``Daily/``, ``Daily Notes/``,
journal files named by date like ``2024-05-01.md``), Excalidraw drawings
(``*.excalidraw.md``) and attachment folders.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

from pathspec import GitIgnoreSpec

from toolwire.errors import PathOutsideWorkspace, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path
from toolwire.spec.sections import DEFAULT_NOTE_EXCLUDES, DEFAULT_NOTE_INCLUDES

__all__ = ["NoteFiles", "read_note_file", "walk_note_files"]


class NoteFiles:
    """A compiled include/exclude pair; paths are posix and workspace-relative."""

    def __init__(
        self,
        include: Sequence[str] = DEFAULT_NOTE_INCLUDES,
        exclude: Sequence[str] = DEFAULT_NOTE_EXCLUDES,
    ) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        # RE2 (no backtracking): a glob like "*a*a*...*b.md" ran ~n^k in Python's re on
        # every file name and hung every run of the vault (issue 45 item 9).
        self._include = GitIgnoreSpec.from_lines(self.include, backend="re2")
        self._exclude = GitIgnoreSpec.from_lines(self.exclude, backend="re2")

    def is_note(self, rel: str) -> bool:
        """Whether the file at ``rel`` is a note (included, and neither it nor a folder
        above it excluded)."""
        rel = _matchable(rel)
        return self._include.match_file(rel) and not self._exclude.match_file(rel)

    def skips_folder(self, rel_dir: str) -> bool:
        """Whether the folder ``rel_dir`` is excluded as a whole (its files never read)."""
        return self._exclude.match_file(_matchable(rel_dir).rstrip("/") + "/")


def _matchable(name: str) -> str:
    """``name`` as RE2 can take it: a file name that is not UTF-8 arrives with surrogate
    escapes, which RE2's UTF-8 encoding refuses; each undecodable byte matches as U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def walk_note_files(fs: Confined, files: NoteFiles, warnings: list[str]) -> Iterable[str]:
    """Workspace-relative posix paths of the note files, folder by folder in sorted order.

    Hidden folders, symlinked folders (a warning) and excluded folders are not
    entered; a file name the write gate would refuse is skipped with a warning.
    """
    for folder, dirnames, filenames, dir_fd in fs.walk(warnings=warnings):  # bounded
        keep = []
        for name in sorted(dirnames):
            if name.startswith("."):
                continue  # .git, .toolwire and other tools' hidden folders
            if files.skips_folder(f"{folder}/{name}" if folder else name):
                continue  # excluded by the spec's notes globs: never entered
            if _is_link(dir_fd, name):
                # Folder links are never followed: no loops, no notes read twice.
                rel_dir = f"{folder}/{name}" if folder else name
                warnings.append(f"skipped {rel_dir}/: symlinked folder (not followed)")
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if name.startswith(".") or not name.endswith(".md"):
                continue
            rel = f"{folder}/{name}" if folder else name
            if not files.is_note(rel):
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                warnings.append(f"skipped {rel!r}: file name is not valid UTF-8")
                continue
            try:
                # A name the write gate refuses (a newline, a control or bidi character,
                # a backslash) could never be changed, and would reach the request,
                # reports and logs as an id: such a file is not a note.
                normalize_rel_path(rel)
            except PathOutsideWorkspace as exc:
                warnings.append(f"skipped {rel!r}: {exc.message}")
                continue
            yield rel


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_note_file(
    fs: Confined, rel: str, warnings: list[str], files: NoteFiles | None = None
) -> bytes | None:
    """The file's bytes, or None (with a warning) for links, special files, errors.

    A symlink is never a note of its own: to another note it is that note, read
    once at its own path; to anything else (out of the workspace, into a hidden
    folder, a file the notes globs leave out) it is not a note. Reading it as a
    second note judged the same text twice, and a change to it replaced the link
    with a plain file, which ``toolwire undo`` restored as a file, not as the link.
    """
    try:
        target = fs.resolve_link(rel)
        if target != rel:
            st = fs.lstat(target)
            if st is None:
                warnings.append(f"skipped {rel}: a symlink to a file that does not exist")
            elif stat.S_ISREG(st.st_mode) and (files or NoteFiles()).is_note(target):
                warnings.append(f"skipped {rel}: a symlink to the note {target}, read there")
            else:
                warnings.append(f"skipped {rel}: a symlink to {target}, which is not a note")
            return None
        data = fs.read_bytes(rel)
    except PathOutsideWorkspace as exc:
        warnings.append(f"skipped {rel}: {exc.message}")
        return None
    except WorkspaceError:
        # A fifo would block forever; devices are not notes.
        warnings.append(f"skipped {rel}: not a regular file")
        return None
    except OSError as exc:
        warnings.append(f"skipped {rel}: {exc.strerror or exc}")
        return None
    if data is None:
        warnings.append(f"skipped {rel}: removed while the notes were read")
    return data
