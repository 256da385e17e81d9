"""The one way toolwire touches a workspace on disk: every path walked from a folder descriptor.

Why. Checking a path (``realpath``) and then opening it leaves a window in
which another process can swap a folder for a symlink, and the open follows it
out of the workspace (issue #16 item 6: 3 of 4,560 writes landed outside).
And ``.toolwire/`` itself can be a symlink, or hold a dangling one at
``lock`` or ``.gitignore`` (items 3 and 4). Here every path is walked one
component at a time from a descriptor of the workspace folder, each folder
opened with ``O_NOFOLLOW`` relative to its parent's descriptor, and each file
opened, created or renamed relative to its folder's descriptor without
following a link. A symlink anywhere on the way is refused, never followed,
whatever happens between two calls.

One exception, for reading only: a note that is a symlink to another file of
the same workspace is read at its target (:meth:`Confined.resolve_link`); the
link text is resolved here, lexically, and the result walked again, so a link
leading out or into a hidden folder is refused.

Refusals are :class:`~toolwire.errors.PathOutsideWorkspace` (a link, a parent
that is not a folder) or :class:`~toolwire.errors.WorkspaceError` (a folder,
fifo or device where a regular file belongs: ``.toolwire/lock`` made a folder
is an error with a code, not an ``IsADirectoryError`` traceback). Other OS
errors (a full disk, EACCES) stay ``OSError`` so callers can roll back.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from toolwire.errors import PathOutsideWorkspace, WorkspaceError
from toolwire.files.walk import DIR_FLAGS, MAX_WALK_DEPTH, MAX_WALK_ENTRIES, walk_folders

__all__ = [
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "Confined",
    "kind_of",
    "split_rel",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_MAX_LINK_HOPS = 8
# Temp files are named by toolwire, never after the target: a 250-byte note name
# plus a prefix and suffix would pass NAME_MAX (issue #16 item 14), and a fixed
# pattern is what recovery looks for when it clears a crash's leftovers (item 21).
TEMP_PREFIX = ".tw-"
TEMP_SUFFIX = ".tmp"
_NEW_FILE_MODE = 0o644


def split_rel(rel: str | Sequence[str]) -> list[str]:
    """The components of a workspace-relative path; refuses absolute paths, ``..`` and NUL."""
    if not isinstance(rel, str):
        parts = list(rel)
    elif rel.startswith("/"):
        raise PathOutsideWorkspace(f"path {rel!r} is absolute")
    else:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\x00" in part:
            raise PathOutsideWorkspace(f"path {'/'.join(parts)!r} leaves the workspace")
    return parts


def kind_of(mode: int) -> str:
    """A file type in words, for messages."""
    for test, word in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return word
    return "device"


def _refusal(exc: OSError, where: str) -> WorkspaceError | None:
    """The toolwire error for an OS error that means "not what it must be", else None."""
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return PathOutsideWorkspace(
            f"{where} is a symbolic link; toolwire never writes or reads through links here"
        )
    if exc.errno == errno.ENOTDIR:
        return PathOutsideWorkspace(f"{where}: a part of the path is not a folder (or a link)")
    if exc.errno == errno.EISDIR:
        return WorkspaceError(f"{where} is a folder where toolwire expects a regular file")
    if exc.errno == errno.ENXIO:
        return WorkspaceError(f"{where} is a special file (fifo, socket or device)")
    return None


class Confined:
    """A workspace folder held open; methods take posix paths relative to it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        try:
            self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(
                f"workspace {root} cannot be opened: {exc.strerror or exc}"
            ) from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ folders

    @contextmanager
    def folder(self, rel: str | Sequence[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``rel``, every component opened without following links.

        With ``create``, missing folders are made (each new entry fsynced into its
        parent). A missing folder otherwise raises FileNotFoundError.
        """
        parts = split_rel(rel)
        opened: list[int] = []
        current = self._fd
        try:
            for depth, name in enumerate(parts):
                where = "/".join(parts[: depth + 1])
                try:
                    fd = self._open_dir(current, name, create)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    if exc.errno == errno.ENOTDIR and self._is_link(current, name):
                        raise PathOutsideWorkspace(
                            f"{where} is a symbolic link; toolwire never follows links here"
                        ) from None
                    refusal = _refusal(exc, where)
                    if refusal is not None:
                        raise refusal from None
                    raise
                opened.append(fd)
                current = fd
            yield current
        finally:
            for fd in reversed(opened):
                os.close(fd)

    @staticmethod
    def _open_dir(parent: int, name: str, create: bool) -> int:
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        with suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent)
            os.fsync(parent)
        # O_NOFOLLOW again: a link swapped in between mkdir and open is still refused.
        return os.open(name, DIR_FLAGS, dir_fd=parent)

    @staticmethod
    def _is_link(parent: int, name: str) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def make_folders(self, rel: str) -> None:
        """Create ``rel`` and its missing parents, inside the workspace."""
        with self.folder(rel, create=True):
            pass

    def listdir(self, rel: str = "") -> list[str]:
        """Names in the folder ``rel`` (sorted); FileNotFoundError if it does not exist."""
        with self.folder(rel) as fd:
            return sorted(os.listdir(fd))

    def fsync_folder(self, rel: str = "") -> None:
        with self.folder(rel) as fd:
            os.fsync(fd)

    # ------------------------------------------------------------------ entries

    @staticmethod
    def _split(rel: str) -> tuple[list[str], str]:
        parts = split_rel(rel)
        if not parts:
            raise PathOutsideWorkspace("the path names the workspace itself, not a file")
        return parts[:-1], parts[-1]

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry's own status (a link is not followed), None if it does not exist."""
        parent, name = self._split(rel)
        try:
            with self.folder(parent) as fd:
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def resolve_link(self, rel: str) -> str:
        """``rel``, or where its chain of symlinks ends when every hop stays inside.

        A link out of the workspace, into a hidden folder (``.git``, ``.toolwire``)
        or in a loop raises PathOutsideWorkspace. Only for reading notes.
        """
        current = "/".join(split_rel(rel))
        for _ in range(_MAX_LINK_HOPS):
            parent, name = self._split(current)
            try:
                with self.folder(parent) as fd:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISLNK(st.st_mode):
                        return current
                    target = os.readlink(name, dir_fd=fd)
            except FileNotFoundError:
                return current
            current = self._link_target(rel, target, parent)
        raise PathOutsideWorkspace(f"{rel} is a loop of symbolic links")

    def _link_target(self, rel: str, target: str, parent: list[str]) -> str:
        if os.path.isabs(target):
            # Only to *name* the place: the walk that opens it is confined.
            head, tail = os.path.split(target)
            full = os.path.join(os.path.realpath(head), tail)
            resolved = os.path.relpath(full, self.root)
        else:
            resolved = os.path.normpath(os.path.join(*parent, target) if parent else target)
        parts = resolved.split("/")
        if os.path.isabs(resolved) or resolved in (".", "") or parts[0] == "..":
            raise PathOutsideWorkspace(
                f"{rel} is a symlink to {target}, outside the workspace {self.root}"
            )
        if any(part.startswith(".") for part in parts):
            raise PathOutsideWorkspace(f"{rel} is a symlink into a hidden folder ({target})")
        return resolved

    def read_bytes(
        self, rel: str, *, limit: int | None = None, follow_inside: bool = False
    ) -> bytes | None:
        """The bytes of the regular file ``rel``; None if it does not exist.

        Never blocks on a fifo (non-blocking open, then ``fstat`` of the open
        descriptor refuses anything but a regular file). With ``limit``, at most
        ``limit + 1`` bytes are read. ``follow_inside`` reads a symlink at its
        target when that stays inside (see :meth:`resolve_link`).
        """
        if follow_inside:
            rel = self.resolve_link(rel)
        parent, name = self._split(rel)
        try:
            with self.folder(parent) as dir_fd:
                fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            refusal = _refusal(exc, rel)
            if refusal is not None:
                raise refusal from None
            raise
        mode = os.fstat(fd).st_mode  # of what was opened, not of what a path named earlier
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise WorkspaceError(f"{rel} is a {kind_of(mode)}, not a regular file")
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if limit is None else handle.read(limit + 1)

    def write_atomic(
        self,
        rel: str,
        data: bytes,
        *,
        temp_name: str | None = None,
        make_parents: bool = False,
        replace_link: bool = False,
        before_rename: Callable[[], None] | None = None,
    ) -> None:
        """Replace ``rel`` with ``data``: temp file in the same folder, fsync, rename, fsync folder.

        The file keeps its permissions (a new one gets 0644). An existing folder,
        fifo or device at ``rel`` is refused; so is a symlink unless
        ``replace_link`` (then the link itself is replaced by the file, never
        written through). ``temp_name`` names the temp file (recovery clears a
        named one a crash left); by default a random ``.tw-*.tmp``.

        ``before_rename`` runs once the temp file is on disk, right before the rename;
        what it raises stops the write (the temp file is removed). The journal checks
        there that the note still holds what it read: writing and fsyncing the temp
        file takes milliseconds, and a save landing in them was lost under the rename.
        """
        parent, name = self._split(rel)
        with self.folder(parent, create=make_parents) as dir_fd:
            mode = self._mode_for(dir_fd, name, rel, replace_link)
            tmp = temp_name or f"{TEMP_PREFIX}{secrets.token_hex(8)}{TEMP_SUFFIX}"
            fd = self._create_temp(dir_fd, tmp, fixed=temp_name is not None)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
                    os.fsync(handle.fileno())
                if before_rename is not None:
                    before_rename()
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException as exc:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)  # our own temp file, never a note
                refusal = _refusal(exc, rel) if isinstance(exc, OSError) else None
                if refusal is not None:
                    raise refusal from None
                raise
            os.fsync(dir_fd)

    @staticmethod
    def _mode_for(dir_fd: int, name: str, rel: str, replace_link: bool) -> int:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return _NEW_FILE_MODE
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            if replace_link:
                return _NEW_FILE_MODE
            raise PathOutsideWorkspace(
                f"{rel} is a symbolic link; toolwire never writes through links here"
            )
        raise WorkspaceError(f"{rel} is a {kind_of(st.st_mode)}, not a regular file")

    @staticmethod
    def _create_temp(dir_fd: int, tmp: str, *, fixed: bool) -> int:
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            if not fixed:
                raise
        # A named temp file left by a crash of the same write: it is ours, clear it.
        st = os.stat(tmp, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(f"temp file {tmp} is a {kind_of(st.st_mode)}; remove it")
        os.unlink(tmp, dir_fd=dir_fd)
        return os.open(tmp, _TEMP_FLAGS, 0o600, dir_fd=dir_fd)

    def create_once(self, rel: str, data: bytes, *, sync_folder: bool = True) -> bool:
        """Create ``rel`` with ``data`` unless it exists (True if created), fsynced.

        An existing regular file is left as is; a link or anything else is
        refused. ``sync_folder=False`` leaves the folder's fsync to the caller
        (a journal writes many files, then syncs each folder once).
        """
        parent, name = self._split(rel)
        with self.folder(parent, create=True) as dir_fd:
            try:
                fd = os.open(name, _TEMP_FLAGS, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise PathOutsideWorkspace(
                        f"{rel} is a symbolic link; toolwire never writes through links here"
                    ) from None
                if not stat.S_ISREG(st.st_mode):
                    raise WorkspaceError(
                        f"{rel} is a {kind_of(st.st_mode)}, not a regular file"
                    ) from None
                return False
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if sync_folder:
                os.fsync(dir_fd)
            return True

    def append_line(self, rel: str, line: bytes) -> None:
        """Append ``line`` and a newline to the regular file ``rel`` (created if missing),
        fsynced; a new file's folder is fsynced too. Never through a link."""
        parent, name = self._split(rel)
        with self.folder(parent, create=True) as dir_fd:
            created = not self._exists(dir_fd, name)
            try:
                fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                             | os.O_NONBLOCK | _CLOEXEC, 0o644, dir_fd=dir_fd)  # fmt: skip
            except OSError as exc:
                refusal = _refusal(exc, rel)
                if refusal is not None:
                    raise refusal from None
                raise
            try:
                mode = os.fstat(fd).st_mode
                if not stat.S_ISREG(mode):
                    raise WorkspaceError(f"{rel} is a {kind_of(mode)}, not a regular file")
                os.write(fd, line + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                os.fsync(dir_fd)

    def open_lock_file(self, rel: str) -> int:
        """A read-write descriptor of the regular file ``rel`` (created if missing), for flock."""
        parent, name = self._split(rel)
        with self.folder(parent, create=True) as dir_fd:
            try:
                fd = os.open(
                    name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC,
                    0o644, dir_fd=dir_fd,
                )  # fmt: skip
            except OSError as exc:
                refusal = _refusal(exc, rel)
                if refusal is not None:
                    raise refusal from None
                raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise WorkspaceError(f"{rel} is a {kind_of(mode)}, not a regular file")
        return fd

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` (parents of ``dst`` created); never replaces anything.

        The entry itself moves (a link is moved, not followed); both ends stay inside.
        """
        src_parent, src_name = self._split(src)
        dst_parent, dst_name = self._split(dst)
        with (
            self.folder(src_parent) as src_fd,
            self.folder(dst_parent, create=True) as dst_fd,
        ):
            if self._exists(dst_fd, dst_name):
                raise WorkspaceError(f"{dst} already exists; nothing was moved")
            os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            os.fsync(dst_fd)
            os.fsync(src_fd)

    @staticmethod
    def _exists(dir_fd: int, name: str) -> bool:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def remove_temp(self, rel: str) -> bool:
        """Remove a temp file toolwire left (``.tw-*.tmp``, regular); True if one was removed."""
        parent, name = self._split(rel)
        if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)):
            raise WorkspaceError(f"{rel} is not a toolwire temp file; refusing to remove it")
        try:
            with self.folder(parent) as dir_fd:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    return False
                os.unlink(name, dir_fd=dir_fd)
                os.fsync(dir_fd)
        except (FileNotFoundError, PathOutsideWorkspace):
            return False
        return True

    def walk(
        self,
        start: str = "",
        *,
        max_depth: int = MAX_WALK_DEPTH,
        max_entries: int = MAX_WALK_ENTRIES,
        warnings: list[str] | None = None,
    ) -> Generator[tuple[str, list[str], list[str], int]]:
        """Top-down walk of ``start`` without following links: (rel folder, dirs, files, fd).

        ``rel`` is ``""`` for the top of the workspace. Prune ``dirs`` in place as
        with ``os.walk``; names come sorted. Bounded: folders deeper than ``max_depth``
        are not entered and the walk stops after ``max_entries`` names, each with a
        line in ``warnings`` (``files.walk.walk_folders``).
        """
        base = "/".join(split_rel(start))
        with self.folder(base) as top:
            fd = os.dup(top)
        yield from walk_folders(
            fd, base, max_depth=max_depth, max_entries=max_entries, warnings=warnings
        )
