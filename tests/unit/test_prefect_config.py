"""Whether a Prefect API is configured, read without Prefect: profile files with the
URL they must yield (``# expect:`` on their first line), and the environment's say."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.prefect_settings import prefect_api_url

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "prefect_profiles"
PROFILES = sorted(DATA.glob("*.toml"))


def _expected(path: Path) -> str | None:
    first = path.read_text("utf-8").splitlines()[0]
    assert first.startswith("# expect: "), path.name
    value = first.removeprefix("# expect: ").strip()
    return None if value == "none" else value


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_a_profiles_file_yields_its_active_profiles_url(path: Path, tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / "profiles.toml").write_bytes(path.read_bytes())
    assert prefect_api_url({"PREFECT_HOME": str(home)}) == _expected(path)


def test_the_environment_wins_and_prefect_profile_picks_the_profile(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "profiles.toml").write_bytes((DATA / "active_missing.toml").read_bytes())
    env = {"PREFECT_HOME": str(home)}
    assert prefect_api_url(env) is None
    assert prefect_api_url({**env, "PREFECT_PROFILE": "local"}) == "http://127.0.0.1:4200/api"
    assert prefect_api_url({**env, "PREFECT_API_URL": "http://h:1/api"}) == "http://h:1/api"
    path = tmp_path / "elsewhere.toml"
    path.write_bytes((DATA / "active_with_url.toml").read_bytes())
    assert prefect_api_url({"PREFECT_PROFILES_PATH": str(path)}) == "http://127.0.0.1:4200/api"


def test_no_profiles_file_is_no_api(tmp_path: Path) -> None:
    assert prefect_api_url({"PREFECT_HOME": str(tmp_path / "nothing-here")}) is None
