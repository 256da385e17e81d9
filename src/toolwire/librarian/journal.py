"""Apply a plan of file changes so the workspace is never half-written; undo it exactly.

Write-ahead journal in ``<root>/.toolwire/journal/<run_id>/``:
``manifest.json`` (every change: path, old sha256 or null for a create, new
sha256), ``old/<n>`` and ``new/<n>`` (byte copies) and ``state.json``. The
journal is fsynced before the first note is touched; each note is then
replaced atomically (temp file in the same folder, fsync, ``os.replace``,
fsync of the folder). A file is always either its old or its new bytes.

States: ``applying`` -> ``applied`` -> ``undoing`` -> ``undone``; a note
edited under a running apply makes it ``rolling_back`` -> ``aborted`` (every
note back to old). :func:`recover` finishes whatever a crash interrupted:
``applying`` rolls *forward* (every note ends new), ``rolling_back`` and
``undoing`` roll back. Nothing is ever deleted: undoing a create moves the
file to ``.toolwire/trash/<run_id>/<path>``, and a forced undo first copies
the edited text there.

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
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from toolwire.errors import RunNotFound, WorkspaceError
from toolwire.librarian.changes import FileChange
from toolwire.librarian.workspace import resolve_inside, sha256_hex

__all__ = [
    "CRASH_ENV",
    "apply_plan",
    "diff_plan",
    "git_commit",
    "journal_state",
    "recover",
    "undo_run",
]

CRASH_ENV = "TOOLWIRE_TEST_CRASH_AFTER_WRITES"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_NEW_FILE_MODE = 0o644


# ---------------------------------------------------------------- durable file primitives


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data``: temp file in the same folder, fsync, rename, fsync dir."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    # Hidden temp name: a leftover from a crash is never read as a note.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)  # our own temp file, never a note
        raise
    _fsync_dir(target.parent)


def _write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _read_current(path: Path) -> bytes | None:
    """The file's bytes, None if it does not exist; WorkspaceError if it is not a file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(f"{path} is not a regular file")
    return path.read_bytes()


def _sha(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


# ---------------------------------------------------------------- journal files


def _root(ws_root: str | os.PathLike[str]) -> Path:
    root = Path(ws_root).resolve()
    if not root.is_dir():
        raise WorkspaceError(f"workspace {ws_root} is not a directory")
    return root


def _journal_dir(root: Path, run_id: str) -> Path:
    if not _RUN_ID.match(run_id):
        raise WorkspaceError(f"run id {run_id!r} is not a safe folder name")
    return root / ".toolwire" / "journal" / run_id


def _ensure_toolwire_dir(root: Path) -> None:
    base = root / ".toolwire"
    base.mkdir(exist_ok=True)
    ignore = base / ".gitignore"
    if not ignore.exists():  # keep the journal, trash and lock out of the user's git
        _write_durable(ignore, b"*\n")


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One toolwire process at a time changes a workspace (advisory flock)."""
    _ensure_toolwire_dir(root)
    with open(root / ".toolwire" / "lock", "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise WorkspaceError(
                    f"another toolwire process is changing {root}; try again when it ends"
                ) from None
            raise
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _set_state(jdir: Path, state: str, detail: str | None = None) -> None:
    record = {"state": state, "updated_at": time.time(), "detail": detail}
    _atomic_write(jdir / "state.json", json.dumps(record).encode("utf-8"))


def journal_state(ws_root: str | os.PathLike[str], run_id: str) -> str | None:
    """The journal state of ``run_id`` (None: the journal was never completed)."""
    jdir = _journal_dir(_root(ws_root), run_id)
    if not jdir.is_dir():
        raise RunNotFound(f"no journal for run {run_id} in {ws_root}")
    return _read_state(jdir)


def _read_state(jdir: Path) -> str | None:
    try:
        return str(json.loads((jdir / "state.json").read_text("utf-8"))["state"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise WorkspaceError(f"journal {jdir} has a corrupt state.json: {exc}") from None


def _write_journal(jdir: Path, run_id: str, changes: Sequence[FileChange]) -> None:
    (jdir / "old").mkdir(parents=True)
    (jdir / "new").mkdir()
    entries = []
    for n, change in enumerate(changes):
        if change.old is not None:
            _write_durable(jdir / "old" / str(n), change.old)
        _write_durable(jdir / "new" / str(n), change.new)
        entries.append(
            {"n": n, "path": change.path, "old_sha256": change.old_sha256,
             "new_sha256": change.new_sha256}
        )  # fmt: skip
    manifest = {"version": 1, "run_id": run_id, "created_at": time.time(), "changes": entries}
    _write_durable(jdir / "manifest.json", json.dumps(manifest, indent=2).encode("utf-8"))
    for folder in (jdir / "old", jdir / "new", jdir, jdir.parent, jdir.parent.parent):
        _fsync_dir(folder)


def _created_at(jdir: Path) -> tuple[float, str]:
    """Sort key: oldest run first, so interrupted runs are finished in the order they ran."""
    try:
        return float(
            json.loads((jdir / "manifest.json").read_text("utf-8"))["created_at"]
        ), jdir.name
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0, jdir.name


def _load_entries(jdir: Path) -> list[dict[str, Any]]:
    """Manifest entries with their ``old``/``new`` bytes, checked against the recorded hashes."""
    try:
        manifest = json.loads((jdir / "manifest.json").read_text("utf-8"))
        entries = list(manifest["changes"])
        for entry in entries:
            n = entry["n"]
            entry["old"] = (
                None if entry["old_sha256"] is None else (jdir / "old" / str(n)).read_bytes()
            )
            entry["new"] = (jdir / "new" / str(n)).read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WorkspaceError(f"journal {jdir} is unreadable: {exc}") from None
    for entry in entries:
        if _sha(entry["old"]) != entry["old_sha256"] or _sha(entry["new"]) != entry["new_sha256"]:
            raise WorkspaceError(f"journal {jdir} is corrupt: copy {entry['n']} fails its sha256")
    return entries


# ---------------------------------------------------------------- moving files between states


def _trash_path(root: Path, run_id: str, rel: str) -> Path:
    target = root / ".toolwire" / "trash" / run_id / rel
    candidate, n = target, 1
    while os.path.lexists(candidate):
        candidate = target.with_name(f"{target.name}.{n}")
        n += 1
    return candidate


def _to_trash(root: Path, run_id: str, rel: str, path: Path, *, copy: bool) -> None:
    dest = _trash_path(root, run_id, rel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if copy:
        _atomic_write(dest, path.read_bytes())
    else:
        os.replace(path, dest)  # same file system: an atomic move, never an unlink
        _fsync_dir(dest.parent)
        _fsync_dir(path.parent)


def _converge(
    root: Path,
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
        path = resolve_inside(root, entry["path"])
        current = _sha(_read_current(path))
        if current == entry[f"{to}_sha256"]:
            continue
        if current != entry[f"{source}_sha256"]:
            conflicts.append(entry["path"])
            continue
        _move_to(root, run_id, entry, path, to)
        changed.append(entry["path"])
        if crash_after is not None and len(changed) == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)  # test-only, see the module docstring
    return changed, conflicts


def _move_to(root: Path, run_id: str, entry: dict[str, Any], path: Path, to: str) -> None:
    data: bytes | None = entry[to]
    if data is None:  # undoing a create: keep the file, out of the workspace
        _to_trash(root, run_id, entry["path"], path, copy=False)
        return
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True)
        # Make the new folders' entries durable too, up to the workspace root.
        folder = path.parent
        while folder != root and folder.is_relative_to(root):
            _fsync_dir(folder.parent)
            folder = folder.parent
    _atomic_write(path, data)


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
    jdir = _journal_dir(root, run_id)
    changes = [c for c in changes if c.old != c.new]
    if not changes:
        return []
    seen: set[str] = set()
    for change in changes:
        if change.path in seen:
            raise WorkspaceError(f"the plan changes {change.path} twice; merge the changes first")
        seen.add(change.path)
    with _locked(root):
        for change in changes:
            current = _read_current(resolve_inside(root, change.path))
            if _sha(current) != change.old_sha256:
                raise WorkspaceError(
                    f"note changed since the plan: {change.path}; nothing was written, run again"
                )
        if jdir.exists():
            raise WorkspaceError(f"run {run_id} already has a journal in {jdir}")
        try:
            _write_journal(jdir, run_id, changes)
            _set_state(jdir, "applying")
        except OSError as exc:
            # No note was touched yet and the journal has no state: it is only our
            # copies, so remove them (they may be what filled the disk).
            shutil.rmtree(jdir, ignore_errors=True)
            raise WorkspaceError(
                f"cannot write the journal of run {run_id}: {_os_reason(exc)}; no note was changed"
            ) from None
        entries = _load_entries(jdir)
        crash = os.environ.get(CRASH_ENV)
        try:
            written, conflicts = _converge(
                root, run_id, entries, to="new", crash_after=int(crash) if crash else None
            )
        except OSError as exc:
            _roll_back_after(root, run_id, jdir, entries, exc)
        if conflicts:
            _set_state(jdir, "rolling_back", f"edited during apply: {', '.join(conflicts)}")
            _converge(root, run_id, entries, to="old")
            _set_state(jdir, "aborted", f"edited during apply: {', '.join(conflicts)}")
            raise WorkspaceError(
                f"note changed since the plan: {', '.join(conflicts)}; "
                f"run {run_id} was rolled back, no note changed"
            )
        _set_state(jdir, "applied")
    return written


def _os_reason(exc: OSError) -> str:
    """One line for an OS error, naming a full disk plainly (ENOSPC, EDQUOT, EFBIG)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no space left for the file ({os.strerror(exc.errno)})"
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def _roll_back_after(
    root: Path, run_id: str, jdir: Path, entries: list[dict[str, Any]], exc: OSError
) -> None:
    """A note write failed mid-apply (disk full, I/O error): put every note back, then raise.

    The run fails, so the workspace must not keep half of it. If the rollback
    itself cannot write (the disk is still full), the journal keeps its state
    and the next run's :func:`recover` finishes it, once there is room.
    """
    reason = _os_reason(exc)
    try:
        _set_state(jdir, "rolling_back", f"write failed during apply: {reason}")
        _converge(root, run_id, entries, to="old")
        _set_state(jdir, "aborted", f"write failed during apply: {reason}")
    except OSError as again:
        raise WorkspaceError(
            f"apply of run {run_id} failed: {reason}; rolling back failed too "
            f"({_os_reason(again)}): every note is its old or new text, and the next "
            "`toolwire run` on this workspace finishes the journal once there is room"
        ) from None
    raise WorkspaceError(
        f"apply of run {run_id} failed: {reason}; the run was rolled back, no note changed"
    ) from None


def recover(ws_root: str | os.PathLike[str]) -> list[str]:
    """Finish every run a crash interrupted; returns their run ids (idempotent).

    ``applying`` rolls forward to ``applied``; ``rolling_back`` and ``undoing``
    roll back to ``aborted`` / ``undone``. A file edited since the crash is a
    conflict: the others are finished, then WorkspaceError names the files and
    the command that settles it.
    """
    root = _root(ws_root)
    jroot = root / ".toolwire" / "journal"
    if not jroot.is_dir():
        return []
    finish = {"applying": ("new", "applied"), "rolling_back": ("old", "aborted"),
              "undoing": ("old", "undone")}  # fmt: skip
    recovered: list[str] = []
    problems: list[str] = []
    with _locked(root):
        for jdir in sorted((p for p in jroot.iterdir() if p.is_dir()), key=_created_at):
            state = _read_state(jdir)
            if state not in finish:
                continue  # done, or never started writing notes (no state yet)
            to, final = finish[state]
            try:
                _, conflicts = _converge(root, jdir.name, _load_entries(jdir), to=to)
                if not conflicts:
                    _set_state(jdir, final, f"recovered from {state}")
            except OSError as exc:  # e.g. the disk is still full: try again later
                raise WorkspaceError(
                    f"cannot finish interrupted run {jdir.name}: {_os_reason(exc)}; every "
                    "note is its old or new text, run again once there is room"
                ) from None
            if conflicts:
                problems.append(f"run {jdir.name}: {', '.join(conflicts)}")
                continue
            recovered.append(jdir.name)
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
    jdir = _journal_dir(root, run_id)
    if not jdir.is_dir():
        raise RunNotFound(f"no journal for run {run_id} in {root}: it changed no file here")
    with _locked(root):
        state = _read_state(jdir)
        if state == "undone":
            raise WorkspaceError(f"run {run_id} was already undone")
        if state == "aborted":
            raise WorkspaceError(f"run {run_id} was rolled back when it failed; nothing to undo")
        if state is None:
            raise WorkspaceError(f"run {run_id} never started writing notes; nothing to undo")
        entries = _load_entries(jdir)
        edited = []
        for entry in entries:
            current = _sha(_read_current(resolve_inside(root, entry["path"])))
            if current not in (entry["old_sha256"], entry["new_sha256"]):
                edited.append(entry)
        if edited and not force:
            names = ", ".join(e["path"] for e in edited)
            raise WorkspaceError(
                f"refusing to undo run {run_id}: edited since the run: {names}. "
                "Nothing was restored; pass --force to restore anyway "
                f"(the edited text is kept in .toolwire/trash/{run_id}/)"
            )
        _set_state(jdir, "undoing")
        forced: list[str] = []
        for entry in edited:  # only with force: keep the edited text, then restore
            path = resolve_inside(root, entry["path"])
            if _read_current(path) is not None:
                # A create is moved out whole; an edited note is copied, then overwritten.
                _to_trash(root, run_id, entry["path"], path, copy=entry["old"] is not None)
            if entry["old"] is not None:
                _atomic_write(path, entry["old"])
            forced.append(entry["path"])
        restored, conflicts = _converge(root, run_id, entries, to="old")
        if conflicts:  # only if someone else writes while we hold the lock
            raise WorkspaceError(f"undo of {run_id} incomplete, edited meanwhile: {conflicts}")
        _set_state(jdir, "undone")
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


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A clean environment: no GIT_DIR/GIT_WORK_TREE leaking in, no pager, no prompts.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", LC_ALL="C")
    return subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def git_commit(
    ws_root: str | os.PathLike[str], run_id: str, paths: Sequence[str], message: str
) -> str | None:
    """Commit ``paths`` if the workspace is in a git work tree; returns the sha or None.

    Only the run's paths are committed (whatever else is staged stays staged);
    hooks are skipped (``--no-verify``): no network, no surprises. The run id
    is always in the message.
    """
    root = _root(ws_root)
    probe = _git(root, "rev-parse", "--is-inside-work-tree")
    if probe.returncode != 0 or probe.stdout.strip() != "true" or not paths:
        return None
    _ensure_toolwire_dir(root)
    if run_id not in message:
        message = f"{message}\n\ntoolwire-run: {run_id}"
    identity: list[str] = []
    if _git(root, "config", "user.email").returncode != 0:
        identity = ["-c", "user.name=toolwire", "-c", "user.email=toolwire@localhost"]
    rels = list(paths)
    added = _git(root, "add", "-A", "--", *rels)
    if added.returncode != 0:
        raise WorkspaceError(f"git add failed: {added.stderr.strip()}")
    if _git(root, "diff", "--cached", "--quiet", "--", *rels).returncode == 0:
        return None  # nothing of ours to commit
    done = _git(root, *identity, "commit", "--no-verify", "-q", "-m", message, "--", *rels)
    if done.returncode != 0:
        raise WorkspaceError(f"git commit failed: {done.stderr.strip() or done.stdout.strip()}")
    return _git(root, "rev-parse", "HEAD").stdout.strip()
