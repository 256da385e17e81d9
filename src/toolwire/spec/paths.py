"""Paths a spec names on its own stay inside the spec's folder, or the user names them.

Why. A spec is untrusted (README): it may come from a colleague, a gist, a
download. Issue #30 item 7: ``evil/evil.yaml`` said ``schedule.workspace:
../../home/me/notes`` and shipped a replay script; ``toolwire run evil.yaml``
(no ``--workspace``) rewrote ``diary.md`` there, and ``spec check`` said ok. A
spec must not choose, on its own, a folder the user did not name. So:

* a *write* target (``schedule.workspace``) that resolves (symlinks followed)
  outside the folder holding the spec (or, for a spec in a ``specs/`` folder,
  the project folder above it) is refused: ``run`` without
  ``--workspace`` and ``serve`` stop with one line naming the folder and the
  flag, ``spec check`` reports it as an issue. ``--workspace DIR`` on the command
  line is the user naming the folder: then any folder goes.
* *reads* a spec names outside its folder (its prompt pack, a ``replay:``
  script) are named by ``spec check`` in a ``note:`` line. They are not refused:
  tests and tools write specs next to packs kept elsewhere, a
  pack must be a pack (``pack.yaml`` and its templates) and a replay script
  JSONL replies, and neither is written to.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING

from toolwire.promptpack.shipped import SHIPPED_PACKS

if TYPE_CHECKING:
    from toolwire.spec.model import LoadedSpec

__all__ = [
    "MAX_REPLAY_BYTES",
    "outside_folder",
    "replay_file_problem",
    "outside_spec_folder",
    "spec_folder",
    "spec_reads_outside",
    "workspace_outside",
    "workspace_refusal",
]


# A replay script is recorded replies, kilobytes to megabytes: `replay:/dev/zero` read
# until memory ran out, a FIFO hung the run before it started.
MAX_REPLAY_BYTES = 64 * 1024 * 1024


def replay_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a replay script, or None (a missing file is the provider's
    and preflight's to report, as before)."""
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return f"replay script {path} is not a regular file"
    if info.st_size > MAX_REPLAY_BYTES:
        limit = MAX_REPLAY_BYTES // (1024 * 1024)
        return f"replay script {path} is larger than {limit} MiB"
    return None


def spec_folder(base_dir: Path) -> Path:
    """The folder a spec's paths must stay in: its own, or the project above a ``specs/``
    folder (``project/specs/x.yaml`` may name ``../data/notes``, as the shipped one does)."""
    folder = base_dir.resolve()
    return folder.parent if folder.name == "specs" else folder


def outside_folder(base_dir: Path, written: str | Path) -> Path | None:
    """Where ``written`` (a path in a spec in ``base_dir``) leads, if outside its folder."""
    folder = spec_folder(base_dir)
    target = (base_dir / written).resolve()
    return None if target == folder or target.is_relative_to(folder) else target


def outside_spec_folder(loaded: LoadedSpec, written: str | Path) -> Path | None:
    """Where ``written`` (a path in the spec) leads, if that is outside the spec's folder."""
    return outside_folder(loaded.base_dir, written)


def workspace_refusal(base_dir: Path, written: str, *, hint: str) -> str | None:
    """Why a spec's ``schedule.workspace`` may not be used as it stands, or None."""
    outside = outside_folder(base_dir, written)
    if outside is None:
        return None
    return (
        f"schedule.workspace {written!r} leads to {outside}, outside the spec's folder "
        f"{spec_folder(base_dir)}: a spec does not choose such a folder on its own; {hint}"
    )


def workspace_outside(loaded: LoadedSpec, *, serving: bool = False) -> str | None:
    """:func:`workspace_refusal` of a loaded spec (``serving``: for ``serve``'s words)."""
    schedule = loaded.spec.schedule
    if schedule is None or not schedule.workspace:
        return None
    target = loaded.resolve(schedule.workspace)
    hint = (
        "keep the spec in (or above) its notes folder to serve it"
        if serving
        else f"pass --workspace {target} to run there, or keep the spec beside its notes"
    )
    return workspace_refusal(loaded.base_dir, schedule.workspace, hint=hint)


def spec_reads_outside(loaded: LoadedSpec) -> list[str]:
    """The files a spec reads outside its own folder (for ``spec check`` notes)."""
    found = []
    pack = outside_spec_folder(loaded, loaded.pack_dir)
    if pack is not None and not loaded.pack_dir.is_relative_to(SHIPPED_PACKS):
        found.append(f"prompt_pack reads {pack}, outside the spec's folder")
    replay = loaded.replay_path
    if replay is not None and outside_spec_folder(loaded, replay) is not None:
        found.append(f"model replay script reads {replay}, outside the spec's folder")
    return found
