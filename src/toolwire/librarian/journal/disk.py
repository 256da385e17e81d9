"""The journal as it lies on disk: where a run's journal lives, the workspace lock, and
reading a journal back (its state, its runs in order, its manifest with every copy checked
against its sha256). What ``journal`` writes, this reads; recovery trusts nothing else.
Also the trash (``.toolwire/trash/<run_id>/``), where undo keeps what it takes away.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolwire.errors import RunNotFound, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path
from toolwire.librarian.notes.workspace import sha256_hex

__all__ = [
    "JOURNAL_DIR",
    "STATE_LOG",
    "TOOLWIRE_DIR",
    "is_folder",
    "journal_dir",
    "journal_state",
    "journals",
    "line_sum",
    "load_entries",
    "locked",
    "os_reason",
    "read_current",
    "read_state",
    "sha_of",
    "to_trash",
    "trash_path",
    "workspace_root",
]

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
TOOLWIRE_DIR = ".toolwire"
JOURNAL_DIR = ".toolwire/journal"
STATES = frozenset({"applying", "applied", "rolling_back", "aborted", "undoing", "undone"})
STATE_LOG = "states.log"  # every state, appended: what recovery reads if state.json is torn


def workspace_root(ws_root: str | os.PathLike[str]) -> Path:
    root = Path(ws_root).resolve()
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "does not exist"
        raise WorkspaceError(f"workspace {ws_root} {what}")
    return root


def journal_dir(run_id: str) -> str:
    if not RUN_ID.match(run_id):
        raise WorkspaceError(f"run id {run_id!r} is not a safe folder name")
    return f"{JOURNAL_DIR}/{run_id}"


def _ensure_toolwire_dir(fs: Confined) -> None:
    try:
        fs.make_folders(TOOLWIRE_DIR)
        # Keep the journal, trash and lock out of the user's git.
        fs.create_once(f"{TOOLWIRE_DIR}/.gitignore", b"*\n")
    except OSError as exc:  # a read-only workspace folder: an error with a code, no trace
        raise WorkspaceError(
            f"cannot create {TOOLWIRE_DIR}/ in the workspace {fs.root} "
            f"({exc.strerror or exc}): toolwire keeps its journal there; no note was changed"
        ) from None


@contextmanager
def locked(fs: Confined) -> Iterator[None]:
    """One toolwire process at a time changes a workspace (advisory flock)."""
    _ensure_toolwire_dir(fs)
    try:
        fd = fs.open_lock_file(f"{TOOLWIRE_DIR}/lock")
    except OSError as exc:
        raise WorkspaceError(
            f"cannot open {TOOLWIRE_DIR}/lock in the workspace {fs.root} "
            f"({exc.strerror or exc}); no note was changed"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise WorkspaceError(
                    f"another toolwire process is changing {fs.root}; try again when it ends"
                ) from None
            raise
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def journal_state(ws_root: str | os.PathLike[str], run_id: str) -> str | None:
    """The journal state of ``run_id`` (None: the journal was never completed)."""
    jdir = journal_dir(run_id)
    with Confined(workspace_root(ws_root)) as fs:
        if not is_folder(fs, jdir):
            raise RunNotFound(f"no journal for run {run_id} in {ws_root}")
        return read_state(fs, jdir)


def is_folder(fs: Confined, rel: str) -> bool:
    st = fs.lstat(rel)
    return st is not None and stat.S_ISDIR(st.st_mode)


def read_state(fs: Confined, jdir: str) -> str | None:
    """The journal's state: ``state.json``, else the last whole line of ``states.log``.

    A ``state.json`` that is not a known state (cut short by a copy or a sync tool
    mid-apply, zeroed by a crash of a file system that renames before it writes)
    is not trusted, and never blocks recovery (issue #30 item 1): the log's last
    checksummed line is the state; a journal whose log has none either rolls
    forward (``applying``), which leaves every note old or new, since the journal
    holds both copies of every note.
    """
    raw = fs.read_bytes(f"{jdir}/state.json")  # a folder or link here: WorkspaceError
    state = _parse_state(raw)
    if state is not None:
        return state
    logged = _logged_state(fs.read_bytes(f"{jdir}/{STATE_LOG}"))
    if logged is not None:
        return logged
    return None if raw is None else "applying"


def _parse_state(raw: bytes | None) -> str | None:
    try:
        state = json.loads((raw or b"").decode("utf-8"))["state"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return state if state in STATES else None


def _logged_state(raw: bytes | None) -> str | None:
    """The last line of ``states.log`` whose checksum holds (a torn last line is skipped)."""
    for line in reversed((raw or b"").decode("utf-8", "replace").splitlines()):
        record, _, checksum = line.rpartition("\t")
        if record and checksum == line_sum(record):
            return _parse_state(record.encode("utf-8"))
    return None


def line_sum(record: str) -> str:
    return hashlib.sha256(record.encode("utf-8")).hexdigest()[:16]


def journals(fs: Confined) -> list[str]:
    """Journal folders, oldest run first (interrupted runs finish in the order they ran)."""
    try:
        names = fs.listdir(JOURNAL_DIR)
    except FileNotFoundError:
        return []
    found = [f"{JOURNAL_DIR}/{n}" for n in names if RUN_ID.match(n)]
    return sorted((j for j in found if is_folder(fs, j)), key=lambda j: _created_at(fs, j))


def _created_at(fs: Confined, jdir: str) -> tuple[float, str]:
    try:
        raw = fs.read_bytes(f"{jdir}/manifest.json") or b"{}"
        return float(json.loads(raw)["created_at"]), jdir
    except (OSError, WorkspaceError, ValueError, KeyError, TypeError):
        return 0.0, jdir


def load_entries(fs: Confined, jdir: str) -> list[dict[str, Any]]:
    """Manifest entries with their ``old``/``new`` bytes, checked against the recorded hashes."""
    try:
        manifest = json.loads(fs.read_bytes(f"{jdir}/manifest.json") or b"")
        entries = list(manifest["changes"])
        for entry in entries:
            n = int(entry["n"])
            entry["path"] = note_path(entry)
            entry["old"] = None if entry["old_sha256"] is None else fs.read_bytes(f"{jdir}/old/{n}")
            entry["new"] = fs.read_bytes(f"{jdir}/new/{n}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WorkspaceError(f"journal {jdir} is unreadable: {exc}") from None
    for entry in entries:
        missing = entry["new"] is None or (entry["old_sha256"] and entry["old"] is None)
        if (
            missing
            or sha_of(entry["old"]) != entry["old_sha256"]
            or (sha_of(entry["new"]) != entry["new_sha256"])
        ):
            raise WorkspaceError(f"journal {jdir} is corrupt: copy {entry['n']} fails its sha256")
    return entries


def note_path(entry: dict[str, Any]) -> str:
    """The manifest's path, re-checked: a journal on disk is not trusted blindly."""
    return normalize_rel_path(str(entry["path"]))


def sha_of(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def read_current(fs: Confined, path: str) -> bytes | None:
    """The note's bytes (through in-workspace links), None if it does not exist."""
    return fs.read_bytes(path, follow_inside=True)


def trash_path(fs: Confined, run_id: str, rel: str) -> str:
    """A free place under ``.toolwire/trash/<run_id>/``; a second copy goes in a numbered
    folder (``<run_id>/1/<rel>``), never a longer file name (a 255-byte name must fit)."""
    base = f"{TOOLWIRE_DIR}/trash/{run_id}"
    candidate, n = f"{base}/{rel}", 1
    while fs.lstat(candidate) is not None:
        candidate = f"{base}/{n}/{rel}"
        n += 1
    return candidate


def to_trash(fs: Confined, run_id: str, rel: str, *, copy: bool) -> None:
    dest = trash_path(fs, run_id, rel)
    if copy:
        data = read_current(fs, rel)
        if data is not None:
            fs.write_atomic(dest, data, make_parents=True)
    else:
        fs.move(rel, dest)  # one file system: an atomic move, never an unlink


def os_reason(exc: BaseException) -> str:
    """One line for an OS error, naming a full disk (ENOSPC, EDQUOT, EFBIG) and a refused
    write (EACCES, EPERM, EROFS) plainly."""
    if isinstance(exc, WorkspaceError):
        return exc.message
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no space left for the file ({os.strerror(exc.errno)})"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"not allowed to write there ({os.strerror(exc.errno)})"
    return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
