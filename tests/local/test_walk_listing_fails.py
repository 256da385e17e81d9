"""A folder whose listing fails part-way (``/proc``, a network mount, EIO) is named and
left; the notes beside it are still read. ``--workspace /proc`` ended INTERNAL_ERROR
"PermissionError: Permission denied" from the walk before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolwire.files import walk
from toolwire.files.confined import Confined

pytestmark = pytest.mark.local


def test_a_folder_that_cannot_be_listed_is_named_and_the_rest_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rel in ("a/one.md", "bad/two.md", "c/three.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    listed = walk._entries

    def entries(fd: int) -> tuple[list[str], list[str]]:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/bad"):
            raise PermissionError(13, "Permission denied")
        return listed(fd)

    monkeypatch.setattr(walk, "_entries", entries)
    warnings: list[str] = []
    with Confined(tmp_path) as fs:
        seen = {(rel, tuple(files)) for rel, _dirs, files, _fd in fs.walk(warnings=warnings)}
    assert seen == {("", ()), ("a", ("one.md",)), ("bad", ()), ("c", ("three.md",))}
    assert warnings == ["skipped bad/: cannot list it (Permission denied)"]


def test_the_top_folder_failing_is_the_callers_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def entries(fd: int) -> tuple[list[str], list[str]]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(walk, "_entries", entries)
    with Confined(tmp_path) as fs, pytest.raises(OSError, match="Input/output"):
        list(fs.walk())
