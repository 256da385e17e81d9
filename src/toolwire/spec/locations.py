"""Where the store lives when nobody says: one well-known file, whatever the working directory.

A relative default (``data/toolwire.duckdb``) silently started a new, empty store
whenever toolwire ran from another folder. The default is now the per-user data
directory of the XDG base-directory spec (what ``llm`` and most CLI tools use):
``$XDG_DATA_HOME/toolwire/toolwire.duckdb``, else
``~/.local/share/toolwire/toolwire.duckdb``. ``--db`` and ``TOOLWIRE_DB`` still
win; ``toolwire store path`` prints the file in use and why.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STORE_FILE_NAME", "default_db_path", "store_file_problem", "store_location"]

STORE_FILE_NAME = "toolwire.duckdb"


def default_db_path() -> Path:
    """The store file used without ``--db`` or ``TOOLWIRE_DB`` (absolute)."""
    # XDG says a relative XDG_DATA_HOME is invalid and must be ignored.
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "toolwire" / STORE_FILE_NAME


def store_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a store file, or None: one that exists is a regular file (a
    FIFO hung the commands that open it; a folder or a device failed later in DuckDB)."""
    path = path.expanduser()
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        return f"{path} is {kind}, not a store file"
    return None


def store_location(db_flag: Path | None) -> tuple[Path, str]:
    """The store file a command would use, and where that choice came from."""
    if db_flag is not None:
        return db_flag, "--db"
    if os.environ.get("TOOLWIRE_DB"):
        return Path(os.environ["TOOLWIRE_DB"]), "TOOLWIRE_DB"
    return default_db_path(), "default"
