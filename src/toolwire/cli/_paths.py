"""Check that a path a command will write to can be written, before any work starts.

Under Prefect a failure inside the flow is logged as a crash with a traceback; a
path the user mistyped (or a read-only folder) is theirs to fix, so it is found
here first and reported in one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolwire.errors import UsageError

__all__ = ["require_writable_file", "require_writable_dir"]


def require_writable_dir(folder: Path, what: str) -> None:
    """``folder`` exists (created if need be) and this process may create files in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{what}: {folder} exists and is not a folder") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot create folder {folder}: {exc.strerror}") from None
    if not folder.is_dir():
        raise UsageError(f"{what}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: folder {folder} is not writable")


def require_writable_file(path: Path, what: str) -> None:
    """``path`` can be created or overwritten: its folder is writable, it is no folder."""
    path = path.expanduser()
    if path.is_dir():
        raise UsageError(f"{what}: {path} is a folder, not a file")
    if path.exists() and not path.is_file():  # `--db FIFO` hung the run; /dev/full lost it
        raise UsageError(f"{what}: {path} is not a regular file")
    require_writable_dir(path.parent if str(path.parent) else Path("."), what)
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{what}: {path} is not writable")
