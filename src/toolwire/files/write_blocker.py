"""Whether toolwire may replace or create a file in a workspace: a note or folder the user
made read-only (``chmod -w``) is their "leave it", even for root, who could write anyway.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress

from toolwire.errors import WorkspaceError
from toolwire.files.confined import Confined, split_rel

__all__ = ["write_blocker"]


def write_blocker(fs: Confined, rel: str) -> str | None:
    """Why the file ``rel`` is not to be replaced or created, or None.

    A note or folder without its owner's write bit was made read-only by the
    user (``chmod -w``): that is a "leave it", even for root, who could write.
    A folder this process cannot write into (another owner) blocks too. Checked
    before the journal, so one read-only folder leaves its notes as they are
    instead of failing the whole apply (the write itself stays guarded).
    """
    parts = split_rel(rel)
    folder = parts[:-1]
    while folder:  # a create may add folders: the nearest existing one decides
        st = fs.lstat("/".join(folder))
        if st is not None and stat.S_ISDIR(st.st_mode):
            break
        folder = folder[:-1]
    where = "/".join(folder) + "/" if folder else "the workspace folder"
    try:
        with fs.folder(folder) as fd:
            mode = os.fstat(fd).st_mode
            may_write = os.access(
                ".", os.W_OK | os.X_OK, dir_fd=fd,
                effective_ids=os.access in os.supports_effective_ids,
            )  # fmt: skip
            note = None
            if len(folder) == len(parts) - 1:
                with suppress(FileNotFoundError):
                    note = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except (OSError, WorkspaceError) as exc:
        return f"{where} cannot be opened ({getattr(exc, 'message', None) or exc})"
    if not mode & stat.S_IWUSR:
        return f"{where} is read-only"
    if not may_write:
        return f"{where} is not writable here (its owner or a read-only file system)"
    if note is not None and stat.S_ISREG(note.st_mode) and not note.st_mode & stat.S_IWUSR:
        return "the note is read-only"
    return None
