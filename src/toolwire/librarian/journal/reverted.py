"""Changes the user took back: a note whose bytes are again the ones a run replaced.

A user who deletes the topic line a run added (or pastes the old text back) has said
"not this" as surely as with ``toolwire undo``; a nightly run must not write it back.
The workspace's own journal (``.toolwire/journal/<run>/manifest.json``: each change's
old and new sha256) tells: when a note's bytes equal the old bytes of the latest run
that changed it (applied, or undone: ``toolwire undo``), the change was taken back.

The journal is the record of an undo that sticks (issue 45 items 2-4): it says
``undoing`` before the first note is restored, so a run never sees a restored note
without it, whatever happens to the store's side of the undo (a kill before it was
written, a run started alongside), and it moves with the vault (``mv notes notes-2024``).
Only manifests are read (a few hashes per run). A fresh copy of the notes has no
journal, so it is decided again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from toolwire.errors import WorkspaceError
from toolwire.files.confined import Confined
from toolwire.librarian.journal.disk import JOURNAL_DIR, RUN_ID, note_path, read_state

__all__ = ["TAKEN_BACK_STATES", "left_by_runs", "taken_back"]

MAX_MANIFEST = 64 * 1024 * 1024  # a manifest over this is not ours (read as unreadable)
# Journal states whose changes a note can be given back from: applied (taken back by
# hand) and undone or being undone (``toolwire undo``, finished or killed half-way).
TAKEN_BACK_STATES = frozenset({"applied", "undoing", "undone"})


def taken_back(root: Path, current: Mapping[str, str]) -> dict[str, str]:
    """Path -> the run whose change to it was taken back, for every note whose sha256 now
    (``current``: path -> sha256) is the one the latest applied run that changed it
    replaced, by hand or by ``toolwire undo``. Rolled-back and unfinished runs do not
    count; a journal that cannot be read takes nothing back."""
    latest = _latest_changes(root, TAKEN_BACK_STATES)
    return {
        path: run_id
        for path, (_, run_id, old, _) in latest.items()
        if old is not None and current.get(path) == old
    }


def left_by_runs(root: Path, current: Mapping[str, str]) -> dict[str, str]:
    """Path -> the run whose bytes the note still has: the latest applied run that changed
    it wrote exactly what is on disk now (``current``: path -> sha256). What such a note
    says (a topic) is the run's word, not the user's, until they edit it (issue 41)."""
    latest = _latest_changes(root, frozenset({"applied"}))
    return {
        path: run_id for path, (_, run_id, _, new) in latest.items() if current.get(path) == new
    }


Change = tuple[float, str, str | None, str | None]  # when, run id, old and new sha256


def _latest_changes(root: Path, states: frozenset[str]) -> dict[str, Change]:
    """Path -> the latest change to it by a run whose journal is in one of ``states``."""
    latest: dict[str, Change] = {}
    try:
        with Confined(root) as fs:
            names = fs.listdir(JOURNAL_DIR)
            # Each manifest read once (journals() would read it again to sort by time).
            for name in filter(RUN_ID.match, names):
                for path, change in _changes(fs, f"{JOURNAL_DIR}/{name}", states).items():
                    if path not in latest or change[0] >= latest[path][0]:
                        latest[path] = change
    except (OSError, WorkspaceError):  # FileNotFoundError: no journal, a fresh copy
        return {}
    return latest


def _changes(fs: Confined, jdir: str, states: frozenset[str]) -> dict[str, Change]:
    """Path -> (created at, run id, old and new sha256) of the changes of a run whose
    journal is in one of ``states``; {} for any other run or a manifest that cannot be read
    (it takes nothing back; recovery reports it)."""
    try:
        if read_state(fs, jdir) not in states:
            return {}
        manifest = json.loads(fs.read_bytes(f"{jdir}/manifest.json", limit=MAX_MANIFEST) or b"")
        when, run_id = float(manifest["created_at"]), str(manifest["run_id"])
        return {
            note_path(e): (when, run_id, e["old_sha256"], e["new_sha256"])
            for e in manifest["changes"]
        }
    except (OSError, WorkspaceError, ValueError, KeyError, TypeError):
        return {}
