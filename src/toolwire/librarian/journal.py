"""Apply a plan of file changes so the workspace is never half-written; undo it exactly.

Write-ahead journal in ``<root>/.toolwire/journal/<run_id>/``:
``manifest.json`` (every change: path, old sha256 or null for a create, new
sha256), ``old/<n>`` and ``new/<n>`` (byte copies), ``state.json`` and
``states.log`` (every state, checksummed: read when ``state.json`` is torn). The
journal is fsynced before the first note is touched; each note is then
replaced atomically (temp file in the same folder, fsync, rename, fsync of
the folder). A file is always either its old or its new bytes.

Every read and write, of the notes and of ``.toolwire/`` (journal, lock,
trash, ``.gitignore``), goes through :class:`~toolwire.files.confined.Confined`:
paths are walked from a descriptor of the workspace without following links,
so a symlinked ``.toolwire`` or a dangling link at ``.toolwire/lock`` is
refused with a code instead of being written through, and a folder swapped
for a symlink mid-apply cannot redirect a write.

States: ``applying`` -> ``applied`` -> ``undoing`` -> ``undone``; a note
edited under a running apply makes it ``rolling_back`` -> ``aborted`` (every
note back to old). :func:`recover` finishes whatever a crash interrupted:
``applying`` rolls *forward* (every note ends new), ``rolling_back`` and
``undoing`` roll back; it also removes the temp files the crash left (their
names derive from the run id and the note path, so recovery knows them).
:func:`pending_recovery` says what :func:`recover` would do without writing
anything (a dry run must not roll a journal forward). Nothing is ever
deleted: undoing a create moves the file to ``.toolwire/trash/<run_id>/<path>``,
and a forced undo first copies the edited text there.

Test-only hook: ``TOOLWIRE_TEST_CRASH_AFTER_WRITES=k`` makes :func:`apply_plan`
SIGKILL its own process right after the k-th note replace (crash tests).

A write that fails (disk full, I/O error) is a WorkspaceError, never a bare
OSError: before any note is touched the partial journal is removed; after, the
apply is rolled back (or, if even that cannot write, left for :func:`recover`).
"""

from __future__ import annotations

import difflib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolwire.errors import RunNotFound, WorkspaceError
from toolwire.files.confined import TEMP_PREFIX, TEMP_SUFFIX, Confined
from toolwire.librarian.changes import FileChange
from toolwire.librarian.git_commit import git_commit  # noqa: F401  (moved; re-exported)
from toolwire.librarian.workspace import normalize_rel_path, sha256_hex

__all__ = [
    "CRASH_ENV",
    "apply_plan",
    "diff_plan",
    "git_commit",
    "journal_state",
    "pending_recovery",
    "recover",
    "undo_run",
]

CRASH_ENV = "TOOLWIRE_TEST_CRASH_AFTER_WRITES"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_TOOLWIRE = ".toolwire"
_JOURNAL = ".toolwire/journal"
# What recover() finishes, per state: (side the notes go to, final state).
_FINISH = {"applying": ("new", "applied"), "rolling_back": ("old", "aborted"),
           "undoing": ("old", "undone")}  # fmt: skip
_STATES = frozenset({"applying", "applied", "rolling_back", "aborted", "undoing", "undone"})
_STATE_LOG = "states.log"  # every state, appended: what recovery reads if state.json is torn


# ---------------------------------------------------------------- durable file primitives


def _sha(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def _write_durable(fs: Confined, rel: str, data: bytes) -> None:
    """A new journal file (never an existing one), fsynced; its folder is fsynced later."""
    if not fs.create_once(rel, data, sync_folder=False):
        raise WorkspaceError(f"{rel} already exists in the journal")


def _temp_name(run_id: str, path: str) -> str:
    """The temp file a note write of ``run_id`` uses: fixed, so recovery can clear it."""
    digest = hashlib.sha256(f"{run_id}\0{path}".encode()).hexdigest()[:16]
    return f"{TEMP_PREFIX}{digest}{TEMP_SUFFIX}"


def _note_path(entry: dict[str, Any]) -> str:
    """The manifest's path, re-checked: a journal on disk is not trusted blindly."""
    return normalize_rel_path(str(entry["path"]))


def _read_current(fs: Confined, path: str) -> bytes | None:
    """The note's bytes (through in-workspace links), None if it does not exist."""
    return fs.read_bytes(path, follow_inside=True)


# ---------------------------------------------------------------- journal files


def _root(ws_root: str | os.PathLike[str]) -> Path:
    root = Path(ws_root).resolve()
    if not root.is_dir():
        raise WorkspaceError(f"workspace {ws_root} is not a directory")
    return root


def _journal_dir(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise WorkspaceError(f"run id {run_id!r} is not a safe folder name")
    return f"{_JOURNAL}/{run_id}"


def _ensure_toolwire_dir(fs: Confined) -> None:
    fs.make_folders(_TOOLWIRE)
    # Keep the journal, trash and lock out of the user's git.
    fs.create_once(f"{_TOOLWIRE}/.gitignore", b"*\n")


@contextmanager
def _locked(fs: Confined) -> Iterator[None]:
    """One toolwire process at a time changes a workspace (advisory flock)."""
    _ensure_toolwire_dir(fs)
    fd = fs.open_lock_file(f"{_TOOLWIRE}/lock")
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


def _set_state(fs: Confined, jdir: str, state: str, detail: str | None = None) -> None:
    """Record a state twice: a checksummed line appended to ``states.log`` (fsynced),
    then ``state.json`` replaced atomically. Either alone tells recovery the state."""
    record = json.dumps({"state": state, "updated_at": time.time(), "detail": detail})
    fs.append_line(f"{jdir}/{_STATE_LOG}", f"{record}\t{_line_sum(record)}".encode())
    fs.write_atomic(f"{jdir}/state.json", record.encode("utf-8"))


def _line_sum(record: str) -> str:
    return hashlib.sha256(record.encode("utf-8")).hexdigest()[:16]


def journal_state(ws_root: str | os.PathLike[str], run_id: str) -> str | None:
    """The journal state of ``run_id`` (None: the journal was never completed)."""
    jdir = _journal_dir(run_id)
    with Confined(_root(ws_root)) as fs:
        if not _is_folder(fs, jdir):
            raise RunNotFound(f"no journal for run {run_id} in {ws_root}")
        return _read_state(fs, jdir)


def _is_folder(fs: Confined, rel: str) -> bool:
    st = fs.lstat(rel)
    return st is not None and stat.S_ISDIR(st.st_mode)


def _read_state(fs: Confined, jdir: str) -> str | None:
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
    logged = _logged_state(fs.read_bytes(f"{jdir}/{_STATE_LOG}"))
    if logged is not None:
        return logged
    return None if raw is None else "applying"


def _parse_state(raw: bytes | None) -> str | None:
    try:
        state = json.loads((raw or b"").decode("utf-8"))["state"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return state if state in _STATES else None


def _logged_state(raw: bytes | None) -> str | None:
    """The last line of ``states.log`` whose checksum holds (a torn last line is skipped)."""
    for line in reversed((raw or b"").decode("utf-8", "replace").splitlines()):
        record, _, checksum = line.rpartition("\t")
        if record and checksum == _line_sum(record):
            return _parse_state(record.encode("utf-8"))
    return None


def _write_journal(fs: Confined, jdir: str, run_id: str, changes: Sequence[FileChange]) -> None:
    fs.make_folders(f"{jdir}/old")
    fs.make_folders(f"{jdir}/new")
    entries = []
    for n, change in enumerate(changes):
        if change.old is not None:
            _write_durable(fs, f"{jdir}/old/{n}", change.old)
        _write_durable(fs, f"{jdir}/new/{n}", change.new)
        entries.append(
            {"n": n, "path": change.path, "old_sha256": change.old_sha256,
             "new_sha256": change.new_sha256}
        )  # fmt: skip
    manifest = {"version": 1, "run_id": run_id, "created_at": time.time(), "changes": entries}
    _write_durable(fs, f"{jdir}/manifest.json", json.dumps(manifest, indent=2).encode("utf-8"))
    for folder in (f"{jdir}/old", f"{jdir}/new", jdir, _JOURNAL, _TOOLWIRE):
        fs.fsync_folder(folder)


def _journals(fs: Confined) -> list[str]:
    """Journal folders, oldest run first (interrupted runs finish in the order they ran)."""
    try:
        names = fs.listdir(_JOURNAL)
    except FileNotFoundError:
        return []
    found = [f"{_JOURNAL}/{n}" for n in names if _RUN_ID.match(n)]
    return sorted((j for j in found if _is_folder(fs, j)), key=lambda j: _created_at(fs, j))


def _created_at(fs: Confined, jdir: str) -> tuple[float, str]:
    try:
        raw = fs.read_bytes(f"{jdir}/manifest.json") or b"{}"
        return float(json.loads(raw)["created_at"]), jdir
    except (OSError, WorkspaceError, ValueError, KeyError, TypeError):
        return 0.0, jdir


def _load_entries(fs: Confined, jdir: str) -> list[dict[str, Any]]:
    """Manifest entries with their ``old``/``new`` bytes, checked against the recorded hashes."""
    try:
        manifest = json.loads(fs.read_bytes(f"{jdir}/manifest.json") or b"")
        entries = list(manifest["changes"])
        for entry in entries:
            n = int(entry["n"])
            entry["path"] = _note_path(entry)
            entry["old"] = None if entry["old_sha256"] is None else fs.read_bytes(f"{jdir}/old/{n}")
            entry["new"] = fs.read_bytes(f"{jdir}/new/{n}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WorkspaceError(f"journal {jdir} is unreadable: {exc}") from None
    for entry in entries:
        missing = entry["new"] is None or (entry["old_sha256"] and entry["old"] is None)
        if (
            missing
            or _sha(entry["old"]) != entry["old_sha256"]
            or (_sha(entry["new"]) != entry["new_sha256"])
        ):
            raise WorkspaceError(f"journal {jdir} is corrupt: copy {entry['n']} fails its sha256")
    return entries


# ---------------------------------------------------------------- moving files between states


def _trash_path(fs: Confined, run_id: str, rel: str) -> str:
    """A free place under ``.toolwire/trash/<run_id>/``; a second copy goes in a numbered
    folder (``<run_id>/1/<rel>``), never a longer file name (a 255-byte name must fit)."""
    base = f"{_TOOLWIRE}/trash/{run_id}"
    candidate, n = f"{base}/{rel}", 1
    while fs.lstat(candidate) is not None:
        candidate = f"{base}/{n}/{rel}"
        n += 1
    return candidate


def _to_trash(fs: Confined, run_id: str, rel: str, *, copy: bool) -> None:
    dest = _trash_path(fs, run_id, rel)
    if copy:
        data = _read_current(fs, rel)
        if data is not None:
            fs.write_atomic(dest, data, make_parents=True)
    else:
        fs.move(rel, dest)  # one file system: an atomic move, never an unlink


def _converge(
    fs: Confined,
    run_id: str,
    entries: list[dict[str, Any]],
    *,
    to: str,
    crash_after: int | None = None,
) -> tuple[list[str], list[str]]:
    """Bring every entry to its ``to`` side ("new" or "old"), skipping those already there.

    Returns (paths changed, paths in conflict). A conflict is a file that is
    neither its old nor its new bytes: someone edited it; it is left alone.
    """
    source = "old" if to == "new" else "new"
    changed: list[str] = []
    conflicts: list[str] = []
    for entry in entries:
        current = _sha(_read_current(fs, entry["path"]))
        if current == entry[f"{to}_sha256"]:
            continue
        if current != entry[f"{source}_sha256"]:
            conflicts.append(entry["path"])
            continue
        _move_to(fs, run_id, entry, to)
        changed.append(entry["path"])
        if crash_after is not None and len(changed) == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)  # test-only, see the module docstring
    return changed, conflicts


def _move_to(fs: Confined, run_id: str, entry: dict[str, Any], to: str) -> None:
    data: bytes | None = entry[to]
    path: str = entry["path"]
    if data is None:  # undoing a create: keep the file, out of the workspace
        _to_trash(fs, run_id, path, copy=False)
        return
    # A note that was a link inside the workspace becomes a file: never written through.
    fs.write_atomic(
        path, data, temp_name=_temp_name(run_id, path), make_parents=True, replace_link=True
    )


def _clear_temps(fs: Confined, run_id: str, entries: list[dict[str, Any]]) -> int:
    """Remove the temp files a killed apply of ``run_id`` left next to its notes."""
    removed = 0
    for entry in entries:
        folder = entry["path"].rpartition("/")[0]
        name = _temp_name(run_id, entry["path"])
        removed += fs.remove_temp(f"{folder}/{name}" if folder else name)
    return removed


# ---------------------------------------------------------------- public API


def apply_plan(
    ws_root: str | os.PathLike[str], run_id: str, changes: list[FileChange]
) -> list[str]:
    """Write every change through the journal; returns the paths written, in order.

    Every file is first checked to still hold its planned old bytes (absent for
    a create): otherwise WorkspaceError "note changed since the plan" and
    nothing is written. A note edited *during* the apply rolls the run back
    (state ``aborted``) and raises the same error.
    """
    root = _root(ws_root)
    jdir = _journal_dir(run_id)
    changes = [c for c in changes if c.old != c.new]
    if not changes:
        return []
    seen: set[str] = set()
    for change in changes:
        if change.path in seen:
            raise WorkspaceError(f"the plan changes {change.path} twice; merge the changes first")
        seen.add(change.path)
    with Confined(root) as fs, _locked(fs):
        for change in changes:
            current = _read_current(fs, normalize_rel_path(change.path))
            if _sha(current) != change.old_sha256:
                raise WorkspaceError(
                    f"note changed since the plan: {change.path}; nothing was written, run again"
                )
        if fs.lstat(jdir) is not None:
            raise WorkspaceError(f"run {run_id} already has a journal in {root / jdir}")
        try:
            _write_journal(fs, jdir, run_id, changes)
            _set_state(fs, jdir, "applying")
        except OSError as exc:
            # No note was touched yet and the journal has no state: it is only our
            # copies, so remove them (they may be what filled the disk). The folder
            # was just created by us, through the confined walk, inside .toolwire/.
            shutil.rmtree(root / jdir, ignore_errors=True)
            raise WorkspaceError(
                f"cannot write the journal of run {run_id}: {_os_reason(exc)}; no note was changed"
            ) from None
        entries = _load_entries(fs, jdir)
        crash = os.environ.get(CRASH_ENV)
        try:
            written, conflicts = _converge(
                fs, run_id, entries, to="new", crash_after=int(crash) if crash else None
            )
        except (OSError, WorkspaceError) as exc:
            _roll_back_after(fs, run_id, jdir, entries, exc)
        if conflicts:
            _set_state(fs, jdir, "rolling_back", f"edited during apply: {', '.join(conflicts)}")
            _converge(fs, run_id, entries, to="old")
            _set_state(fs, jdir, "aborted", f"edited during apply: {', '.join(conflicts)}")
            raise WorkspaceError(
                f"note changed since the plan: {', '.join(conflicts)}; "
                f"run {run_id} was rolled back, no note changed"
            )
        _set_state(fs, jdir, "applied")
    return written


def _os_reason(exc: BaseException) -> str:
    """One line for an OS error, naming a full disk plainly (ENOSPC, EDQUOT, EFBIG)."""
    if isinstance(exc, WorkspaceError):
        return exc.message
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no space left for the file ({os.strerror(exc.errno)})"
    return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"


def _roll_back_after(
    fs: Confined, run_id: str, jdir: str, entries: list[dict[str, Any]], exc: BaseException
) -> None:
    """A note write failed mid-apply (disk full, I/O error, a folder swapped for a
    link): put every note back, then raise.

    The run fails, so the workspace must not keep half of it. If the rollback
    itself cannot write (the disk is still full), the journal keeps its state
    and the next run's :func:`recover` finishes it, once there is room.
    """
    reason = _os_reason(exc)
    try:
        _set_state(fs, jdir, "rolling_back", f"write failed during apply: {reason}")
        _converge(fs, run_id, entries, to="old")
        _clear_temps(fs, run_id, entries)
        _set_state(fs, jdir, "aborted", f"write failed during apply: {reason}")
    except (OSError, WorkspaceError) as again:
        raise WorkspaceError(
            f"apply of run {run_id} failed: {reason}; rolling back failed too "
            f"({_os_reason(again)}): every note is its old or new text, and the next "
            "`toolwire run` on this workspace finishes the journal once there is room"
        ) from None
    raise WorkspaceError(
        f"apply of run {run_id} failed: {reason}; the run was rolled back, no note changed"
    ) from None


def pending_recovery(ws_root: str | os.PathLike[str]) -> str | None:
    """What :func:`recover` would do on ``ws_root``, in one line; None when nothing is pending.

    Reads only: no lock, no ``.toolwire`` folder created, no note touched. A
    dry run calls this instead of :func:`recover` and reports the line.
    """
    pending = recover(ws_root, dry_run=True)
    if not pending:
        return None
    return (
        "interrupted run(s) pending recovery, left as they are by this dry run: "
        + "; ".join(pending)
        + ". A run without --dry-run finishes them first"
    )


def recover(ws_root: str | os.PathLike[str], *, dry_run: bool = False) -> list[str]:
    """Finish every run a crash interrupted; returns their run ids (idempotent).

    ``applying`` rolls forward to ``applied``; ``rolling_back`` and ``undoing``
    roll back to ``aborted`` / ``undone``; temp files the crash left next to the
    notes are removed. A file edited since the crash is a conflict: the others
    are finished, then WorkspaceError names the files and the command that
    settles it. With ``dry_run`` nothing is written and the result describes
    each pending run (``"<run_id>: applying, 3 note(s) to roll forward"``).
    """
    root = _root(ws_root)
    with Confined(root) as fs:
        journals = _journals(fs)
        if dry_run:
            return [d for d in (_describe(fs, j) for j in journals) if d]
        if not any(_read_state(fs, j) in _FINISH for j in journals):
            return []
        with _locked(fs):
            return _recover_locked(fs)


def _describe(fs: Confined, jdir: str) -> str | None:
    state = _read_state(fs, jdir)
    if state not in _FINISH:
        return None
    to, _ = _FINISH[state]
    entries = _load_entries(fs, jdir)
    todo = sum(_sha(_read_current(fs, e["path"])) != e[f"{to}_sha256"] for e in entries)
    verb = "roll forward" if to == "new" else "roll back"
    return f"{jdir.rsplit('/', 1)[-1]}: {state}, {todo} note(s) to {verb}"


def _recover_locked(fs: Confined) -> list[str]:
    recovered: list[str] = []
    problems: list[str] = []
    for jdir in _journals(fs):  # again, under the lock: another process may have finished one
        run_id = jdir.rsplit("/", 1)[-1]
        state = _read_state(fs, jdir)
        if state not in _FINISH:
            continue  # done, or never started writing notes (no state yet)
        to, final = _FINISH[state]
        try:
            entries = _load_entries(fs, jdir)
            _, conflicts = _converge(fs, run_id, entries, to=to)
            _clear_temps(fs, run_id, entries)
            if not conflicts:
                _set_state(fs, jdir, final, f"recovered from {state}")
        except OSError as exc:  # e.g. the disk is still full: try again later
            raise WorkspaceError(
                f"cannot finish interrupted run {run_id}: {_os_reason(exc)}; every "
                "note is its old or new text, run again once there is room"
            ) from None
        if conflicts:
            problems.append(f"run {run_id}: {', '.join(conflicts)}")
            continue
        recovered.append(run_id)
    if problems:
        raise WorkspaceError(
            "cannot finish interrupted runs, notes were edited since: "
            + "; ".join(problems)
            + ". Restore them with `toolwire undo RUN_ID --workspace DIR --force`"
        )
    return recovered


def undo_run(ws_root: str | os.PathLike[str], run_id: str, *, force: bool = False) -> list[str]:
    """Restore the exact previous bytes of every file ``run_id`` changed; returns them.

    All or nothing: if a file was edited since the run, nothing is restored
    and WorkspaceError names it, unless ``force`` (its current text is first
    copied to ``.toolwire/trash/<run_id>/``). Undoing twice is an error.
    """
    root = _root(ws_root)
    jdir = _journal_dir(run_id)
    with Confined(root) as fs:
        if not _is_folder(fs, jdir):
            raise RunNotFound(f"no journal for run {run_id} in {root}: it changed no file here")
        with _locked(fs):
            return _undo_locked(fs, jdir, run_id, force)


def _undo_locked(fs: Confined, jdir: str, run_id: str, force: bool) -> list[str]:
    state = _read_state(fs, jdir)
    if state == "undone":
        raise WorkspaceError(f"run {run_id} was already undone")
    if state == "aborted":
        raise WorkspaceError(f"run {run_id} was rolled back when it failed; nothing to undo")
    if state is None:
        raise WorkspaceError(f"run {run_id} never started writing notes; nothing to undo")
    entries = _load_entries(fs, jdir)
    edited = []
    for entry in entries:
        current = _sha(_read_current(fs, entry["path"]))
        if current not in (entry["old_sha256"], entry["new_sha256"]):
            edited.append(entry)
    if edited and not force:
        names = ", ".join(e["path"] for e in edited)
        raise WorkspaceError(
            f"refusing to undo run {run_id}: edited since the run: {names}. "
            "Nothing was restored; pass --force to restore anyway "
            f"(the edited text is kept in .toolwire/trash/{run_id}/)"
        )
    _set_state(fs, jdir, "undoing")
    forced: list[str] = []
    for entry in edited:  # only with force: keep the edited text, then restore
        path = entry["path"]
        if fs.lstat(path) is not None:
            # A create is moved out whole; an edited note is copied, then overwritten.
            _to_trash(fs, run_id, path, copy=entry["old"] is not None)
        if entry["old"] is not None:
            fs.write_atomic(
                path, entry["old"], temp_name=_temp_name(run_id, path), make_parents=True,
                replace_link=True,
            )  # fmt: skip
        forced.append(path)
    restored, conflicts = _converge(fs, run_id, entries, to="old")
    if conflicts:  # only if someone else writes while we hold the lock
        raise WorkspaceError(f"undo of {run_id} incomplete, edited meanwhile: {conflicts}")
    _set_state(fs, jdir, "undone")
    return [e["path"] for e in entries if e["path"] in forced or e["path"] in restored]


def diff_plan(changes: Sequence[FileChange]) -> str:
    """Unified diff of every change (``a/path`` -> ``b/path``; creates from /dev/null)."""
    out: list[str] = []
    for change in changes:
        old = "" if change.old is None else change.old.decode("utf-8", errors="replace")
        new = change.new.decode("utf-8", errors="replace")
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile="/dev/null" if change.old is None else f"a/{change.path}",
            tofile=f"b/{change.path}",
        )
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
