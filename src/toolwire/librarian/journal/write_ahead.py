"""Apply a plan of file changes so the workspace is never half-written; undo it exactly.

Write-ahead journal in ``<root>/.toolwire/journal/<run_id>/``:
``manifest.json`` (every change: path, old sha256 or null for a create, new
sha256), ``old/<n>`` and ``new/<n>`` (byte copies), ``state.json`` and
``states.log`` (every state, checksummed: read when ``state.json`` is torn). The
journal is fsynced before the first note is touched; each note is then
replaced atomically (temp file in the same folder, fsync, a last check that
the note still holds what was read, rename, fsync of the folder). A file is
always either its old or its new bytes, and a save made meanwhile is kept.

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

import hashlib
import json
import os
import shutil
import signal
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from toolwire.errors import RunNotFound, WorkspaceError
from toolwire.files.confined import TEMP_PREFIX, TEMP_SUFFIX, Confined
from toolwire.files.paths import normalize_rel_path
from toolwire.files.write_blocker import write_blocker
from toolwire.librarian.journal.disk import (
    JOURNAL_DIR,
    STATE_LOG,
    TOOLWIRE_DIR,
    is_folder,
    journal_dir,
    journals,
    line_sum,
    load_entries,
    locked,
    os_reason,
    read_current,
    read_state,
    sha_of,
    to_trash,
    workspace_root,
)
from toolwire.librarian.notes.changes import FileChange, diff_plan

__all__ = [
    "CRASH_ENV",
    "apply_plan",
    "diff_plan",
    "pending_recovery",
    "recover",
    "restored_by_undo",
    "undo_run",
]

CRASH_ENV = "TOOLWIRE_TEST_CRASH_AFTER_WRITES"
# What recover() finishes, per state: (side the notes go to, final state).
_FINISH = {"applying": ("new", "applied"), "rolling_back": ("old", "aborted"),
           "undoing": ("old", "undone")}  # fmt: skip


# ---------------------------------------------------------------- durable file primitives


def _write_durable(fs: Confined, rel: str, data: bytes) -> None:
    """A new journal file (never an existing one), fsynced; its folder is fsynced later."""
    if not fs.create_once(rel, data, sync_folder=False):
        raise WorkspaceError(f"{rel} already exists in the journal")


def _temp_name(run_id: str, path: str) -> str:
    """The temp file a note write of ``run_id`` uses: fixed, so recovery can clear it."""
    digest = hashlib.sha256(f"{run_id}\0{path}".encode()).hexdigest()[:16]
    return f"{TEMP_PREFIX}{digest}{TEMP_SUFFIX}"


# ---------------------------------------------------------------- journal files


def _set_state(fs: Confined, jdir: str, state: str, detail: str | None = None) -> None:
    """Record a state twice: a checksummed line appended to ``states.log`` (fsynced),
    then ``state.json`` replaced atomically. Either alone tells recovery the state."""
    record = json.dumps({"state": state, "updated_at": time.time(), "detail": detail})
    fs.append_line(f"{jdir}/{STATE_LOG}", f"{record}\t{line_sum(record)}".encode())
    fs.write_atomic(f"{jdir}/state.json", record.encode("utf-8"))


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
    for folder in (f"{jdir}/old", f"{jdir}/new", jdir, JOURNAL_DIR, TOOLWIRE_DIR):
        fs.fsync_folder(folder)


# ---------------------------------------------------------------- moving files between states


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
        current = sha_of(read_current(fs, entry["path"]))
        if current == entry[f"{to}_sha256"]:
            continue
        if current != entry[f"{source}_sha256"]:
            conflicts.append(entry["path"])
            continue
        try:
            _move_to(fs, run_id, entry, to, expect=current)
        except NoteEdited:
            conflicts.append(entry["path"])
            continue
        except OSError as exc:  # say which note: a bare "Permission denied" names nothing
            raise NoteWriteFailed(f"{entry['path']}: {os_reason(exc)}") from None
        changed.append(entry["path"])
        if crash_after is not None and len(changed) == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)  # test-only, see the module docstring
    return changed, conflicts


class NoteEdited(WorkspaceError):
    """A note changed while toolwire was writing its replacement (a conflict, not a fault)."""


class NoteWriteFailed(WorkspaceError):
    """The OS refused a note's write (a full disk, a read-only folder); names the note."""


def _unchanged(fs: Confined, path: str, expect: str | None) -> None:
    """Raise NoteEdited unless ``path`` still holds the bytes hashed ``expect``: called
    right before a rename replaces it, so a save made meanwhile is never lost."""
    if sha_of(read_current(fs, path)) != expect:
        raise NoteEdited(f"{path} was edited while toolwire wrote it; it is left as edited")


def _move_to(
    fs: Confined, run_id: str, entry: dict[str, Any], to: str, *, expect: str | None
) -> None:
    """Put ``entry``'s ``to`` side in place of the note, which holds ``expect`` (a sha256)."""
    data: bytes | None = entry[to]
    path: str = entry["path"]
    if data is None:  # undoing a create: keep the file, out of the workspace
        to_trash(fs, run_id, path, copy=False)
        return
    # A note that was a link inside the workspace becomes a file: never written through.
    fs.write_atomic(
        path, data, temp_name=_temp_name(run_id, path), make_parents=True, replace_link=True,
        before_rename=lambda: _unchanged(fs, path, expect),
    )  # fmt: skip


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
    root = workspace_root(ws_root)
    jdir = journal_dir(run_id)
    changes = [c for c in changes if c.old != c.new]
    if not changes:
        return []
    seen: set[str] = set()
    for change in changes:
        if change.path in seen:
            raise WorkspaceError(f"the plan changes {change.path} twice; merge the changes first")
        seen.add(change.path)
    with Confined(root) as fs, locked(fs):
        for change in changes:
            current = read_current(fs, normalize_rel_path(change.path))
            if sha_of(current) != change.old_sha256:
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
                f"cannot write the journal of run {run_id}: {os_reason(exc)}; no note was changed"
            ) from None
        entries = load_entries(fs, jdir)
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


def _roll_back_after(
    fs: Confined, run_id: str, jdir: str, entries: list[dict[str, Any]], exc: BaseException
) -> None:
    """A note write failed mid-apply (disk full, I/O error, a folder swapped for a
    link): put every note back, then raise.

    The run fails, so the workspace must not keep half of it. If the rollback
    itself cannot write (the disk is still full), the journal keeps its state
    and the next run's :func:`recover` finishes it, once there is room.
    """
    reason = os_reason(exc)
    try:
        _set_state(fs, jdir, "rolling_back", f"write failed during apply: {reason}")
        _converge(fs, run_id, entries, to="old")
        _clear_temps(fs, run_id, entries)
        _set_state(fs, jdir, "aborted", f"write failed during apply: {reason}")
    except (OSError, WorkspaceError) as again:
        raise WorkspaceError(
            f"apply of run {run_id} failed: {reason}; rolling back failed too "
            f"({os_reason(again)}): every note is its old or new text, and the next "
            "`toolwire run` on this workspace finishes the journal once it can write again"
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
    root = workspace_root(ws_root)
    with Confined(root) as fs:
        found = journals(fs)
        if dry_run:
            return [d for d in (_describe(fs, j) for j in found) if d]
        if not any(read_state(fs, j) in _FINISH for j in found):
            return []
        with locked(fs):
            return _recover_locked(fs)


def _describe(fs: Confined, jdir: str) -> str | None:
    state = read_state(fs, jdir)
    if state not in _FINISH:
        return None
    to, _ = _FINISH[state]
    entries = load_entries(fs, jdir)
    todo = sum(sha_of(read_current(fs, e["path"])) != e[f"{to}_sha256"] for e in entries)
    verb = "roll forward" if to == "new" else "roll back"
    return f"{jdir.rsplit('/', 1)[-1]}: {state}, {todo} note(s) to {verb}"


def _recover_locked(fs: Confined) -> list[str]:
    recovered: list[str] = []
    problems: list[str] = []
    for jdir in journals(fs):  # again, under the lock: another process may have finished one
        run_id = jdir.rsplit("/", 1)[-1]
        state = read_state(fs, jdir)
        if state not in _FINISH:
            continue  # done, or never started writing notes (no state yet)
        to, final = _FINISH[state]
        try:
            entries = load_entries(fs, jdir)
            _, conflicts = _converge(fs, run_id, entries, to=to)
            _clear_temps(fs, run_id, entries)
            if not conflicts:
                _set_state(fs, jdir, final, f"recovered from {state}")
        except (OSError, NoteWriteFailed) as exc:  # e.g. the disk is still full: again later
            raise WorkspaceError(
                f"cannot finish interrupted run {run_id}: {os_reason(exc)}; every "
                "note is its old or new text, run again once it can write again"
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
    root = workspace_root(ws_root)
    jdir = journal_dir(run_id)
    with Confined(root) as fs:
        if not is_folder(fs, jdir):
            raise RunNotFound(f"no journal for run {run_id} in {root}: it changed no file here")
        with locked(fs):
            return _undo_locked(fs, jdir, run_id, force)


def restored_by_undo(ws_root: str | os.PathLike[str], run_id: str) -> list[str] | None:
    """The notes an earlier undo of ``run_id`` gave back (they hold their old bytes, or a
    create is gone), or None when its journal does not say ``undone``: a retried
    ``toolwire undo`` after a kill finishes the store's side from the journal."""
    root = workspace_root(ws_root)
    jdir = journal_dir(run_id)
    with Confined(root) as fs:
        if not is_folder(fs, jdir) or read_state(fs, jdir) != "undone":
            return None
        return [
            e["path"]
            for e in load_entries(fs, jdir)
            if sha_of(read_current(fs, e["path"])) == e["old_sha256"]
        ]


def _undo_locked(fs: Confined, jdir: str, run_id: str, force: bool) -> list[str]:
    state = read_state(fs, jdir)
    if state == "undone":
        raise WorkspaceError(f"run {run_id} was already undone")
    if state == "aborted":
        raise WorkspaceError(f"run {run_id} was rolled back when it failed; nothing to undo")
    if state is None:
        raise WorkspaceError(f"run {run_id} never started writing notes; nothing to undo")
    entries = load_entries(fs, jdir)
    edited: list[tuple[dict[str, Any], str | None]] = []
    todo: list[str] = []  # the notes undo writes (not those already back to old)
    for entry in entries:
        current = sha_of(read_current(fs, entry["path"]))
        if current not in (entry["old_sha256"], entry["new_sha256"]):
            edited.append((entry, current))
        if current != entry["old_sha256"]:
            todo.append(entry["path"])
    if edited and not force:
        names = ", ".join(e["path"] + (" (removed)" if now is None else "") for e, now in edited)
        raise WorkspaceError(
            f"refusing to undo run {run_id}: edited since the run: {names}. "
            "Nothing was restored; pass --force to restore anyway "
            f"(the edited text is kept in .toolwire/trash/{run_id}/)"
        )
    # All or nothing here too: a read-only note or folder found half-way left the run
    # half undone (state ``undoing``) behind a bare "Permission denied".
    blocked = [(path, why) for path in todo if (why := write_blocker(fs, path))]
    if blocked:
        raise WorkspaceError(
            f"refusing to undo run {run_id}: "
            + "; ".join(f"{path}: {why}" for path, why in blocked)
            + ". Nothing was restored; make them writable and undo again"
        )
    try:  # a full disk here was a bare "No space left on device" (issue 45 item 12)
        _set_state(fs, jdir, "undoing")
    except OSError as exc:
        raise WorkspaceError(
            f"cannot undo run {run_id}: {os_reason(exc)} writing {jdir}/{STATE_LOG}; "
            "nothing was restored: free some space and undo again"
        ) from None
    try:
        return _restore(fs, jdir, run_id, entries, edited)
    except (NoteWriteFailed, OSError) as exc:
        where = "" if isinstance(exc, NoteWriteFailed) else f" writing in {TOOLWIRE_DIR}/"
        raise WorkspaceError(
            f"undo of run {run_id} stopped: {os_reason(exc)}{where}; the notes are each "
            f"their old or new text: `toolwire undo {run_id}` again (or the next run) "
            "finishes it once it can write"
        ) from None


def _restore(
    fs: Confined,
    jdir: str,
    run_id: str,
    entries: list[dict[str, Any]],
    edited: list[tuple[dict[str, Any], str | None]],
) -> list[str]:
    """Every note back to its old bytes (``edited`` ones first copied to the trash)."""
    forced: list[str] = []
    for entry, seen in edited:  # only with force: keep the edited text, then restore
        path = entry["path"]
        if fs.lstat(path) is not None:
            # A create is moved out whole; an edited note is copied, then overwritten.
            to_trash(fs, run_id, path, copy=entry["old"] is not None)
        if entry["old"] is not None:
            # The copy in the trash is of ``seen``: a save made since would be lost.
            fs.write_atomic(
                path, entry["old"], temp_name=_temp_name(run_id, path), make_parents=True,
                replace_link=True, before_rename=partial(_unchanged, fs, path, seen),
            )  # fmt: skip
        forced.append(path)
    restored, conflicts = _converge(fs, run_id, entries, to="old")
    if conflicts:  # someone else wrote while we held the lock (an editor's save)
        raise WorkspaceError(
            f"undo of run {run_id} incomplete: edited meanwhile, left as edited: "
            f"{', '.join(conflicts)}; `toolwire undo {run_id} --force` restores them too"
        )
    _set_state(fs, jdir, "undone")
    return [e["path"] for e in entries if e["path"] in forced or e["path"] in restored]
