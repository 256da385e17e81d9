"""Model-supplied relative paths: checked, canonical, and resolved inside a workspace.

Its own module so that what needs only these checks (the agent's built-in file
tools) does not load the notes workspace (YAML, the link parser).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from pathlib import Path

from toolwire.errors import PathOutsideWorkspace

__all__ = [
    "CONTROL_CHARS",
    "RESERVED_DIRS",
    "casefold_key",
    "normalize_rel_path",
    "resolve_inside",
]

# Folders toolwire owns or must never write into, at any depth.
RESERVED_DIRS = (".toolwire", ".git")
# C0/C1 controls and DEL, plus the characters that break or disguise a line of
# text: U+2028/U+2029 (str.splitlines breaks on them) and the bidi controls
# (U+200E/F, U+202A-E, U+2066-9) that make "\u202egpj.md" display as "dm.jpg".
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def casefold_key(name: str) -> str:
    """Compare key for names: NFKC + casefold, so ``Café.md``/``café.md`` (NFD) collide."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def normalize_rel_path(rel: str) -> str:
    """Check a model-supplied relative path's syntax and return it in canonical posix form.

    Rejects (PathOutsideWorkspace) empty paths, NUL, control, line-separator
    and bidi characters,
    backslashes, absolute and drive paths, ``~``, ``..``, hidden components
    (the loader never reads them) and ``.toolwire``/``.git``. ``.`` and doubled
    slashes are dropped: ``./tech//a.md`` is ``tech/a.md``.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise PathOutsideWorkspace("empty path")
    if "\x00" in rel:
        raise PathOutsideWorkspace(f"path {rel!r} contains a NUL byte")
    if "\\" in rel:
        raise PathOutsideWorkspace(f"path {rel!r} contains a backslash; use / between folders")
    if CONTROL_CHARS.search(rel):
        raise PathOutsideWorkspace(f"path {rel!r} contains a control or bidi character")
    if rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        raise PathOutsideWorkspace(f"path {rel!r} is absolute; give a path inside the workspace")
    if rel.startswith("~"):
        raise PathOutsideWorkspace(f"path {rel!r} starts with ~; give a path inside the workspace")
    if rel.endswith("/"):
        raise PathOutsideWorkspace(f"path {rel!r} names a folder, not a file")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        raise PathOutsideWorkspace(f"path {rel!r} names no file")
    for part in parts:
        if part == "..":
            raise PathOutsideWorkspace(f"path {rel!r} uses '..'; paths must stay inside")
        if casefold_key(part) in RESERVED_DIRS:
            raise PathOutsideWorkspace(f"path {rel!r} is inside {part}/, which toolwire reserves")
        if part.startswith("."):
            raise PathOutsideWorkspace(f"path {rel!r} has a hidden component {part!r}")
    return "/".join(parts)


def resolve_inside(root: Path, rel: str) -> Path:
    """The file ``rel`` names under ``root`` (resolved), after every safety check.

    Beyond :func:`normalize_rel_path`, follows symlinks (of the file and of
    missing or existing parents) and rejects a real path outside ``root``, and
    rejects an existing target that is a folder, fifo, socket or device.
    Returns the lexical path (``root/rel``): that is where writes happen.
    """
    clean = normalize_rel_path(rel)
    candidate = root.joinpath(*clean.split("/"))
    try:
        real = Path(os.path.realpath(candidate))
    except OSError as exc:  # a folder renamed or swapped for a link while we resolve
        raise PathOutsideWorkspace(f"path {rel!r} changed while it was resolved ({exc})") from None
    if real == root or not real.is_relative_to(root):
        raise PathOutsideWorkspace(
            f"path {rel!r} resolves to {real}, outside the workspace {root} (a symlink?)"
        )
    if any(part.startswith(".") for part in real.relative_to(root).parts):
        # A link inside the folder may still lead into .git/ or .toolwire/.
        raise PathOutsideWorkspace(f"path {rel!r} resolves into a hidden or reserved folder")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return candidate
    except OSError as exc:  # ELOOP, ENOTDIR (a parent is a file), EACCES...
        raise PathOutsideWorkspace(f"path {rel!r} cannot be used: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise PathOutsideWorkspace(f"path {rel!r} is a folder, not a note file")
    if not stat.S_ISREG(st.st_mode):
        raise PathOutsideWorkspace(f"path {rel!r} is a special file (fifo, socket or device)")
    return candidate
