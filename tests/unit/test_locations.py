"""The store's default location: one per-user file, whatever the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.spec.locations import default_db_path, store_location

pytestmark = pytest.mark.unit


def test_default_is_under_xdg_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db_path() == tmp_path / "toolwire" / "toolwire.duckdb"


def test_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    # The XDG spec: relative paths are invalid; a cwd-relative store is the bug we fix.
    monkeypatch.setenv("XDG_DATA_HOME", "rel/dir")
    monkeypatch.setenv("HOME", "/home/someone")
    assert default_db_path() == Path("/home/someone/.local/share/toolwire/toolwire.duckdb")


def test_default_does_not_depend_on_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    first = default_db_path()
    monkeypatch.chdir(tmp_path)
    assert default_db_path() == first and first.is_absolute()


def test_flag_beats_environment_beats_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_DB", "/env/s.duckdb")
    assert store_location(Path("/flag/s.duckdb")) == (Path("/flag/s.duckdb"), "--db")
    assert store_location(None) == (Path("/env/s.duckdb"), "TOOLWIRE_DB")
    monkeypatch.delenv("TOOLWIRE_DB")
    assert store_location(None) == (default_db_path(), "default")
