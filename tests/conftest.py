"""Shared fixtures: repository paths and a quiet, project-local Prefect home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

# Prefect reads its settings at import: keep it offline, quiet and out of ~/.prefect.
os.environ.setdefault("PREFECT_HOME", str(REPO / ".prefect"))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# Prefect's temporary server gets 20 s to start by default; at a load of ~13 on 2 cores
# it took longer and a flow test failed (issue 27). Tests that run flows without a
# server of their own wait up to 5 minutes instead; a quiet start still takes ~5 s.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Import Prefect's server stack now, at a shallow stack, when a test may run a flow.

    Prefect's client imports it lazily, through beartype's import hook (docket ->
    key_value), which compiles modules from their AST. On CPython 3.11.7, converting an
    AST hundreds of frames deep under pytest once raised "SystemError: AST constructor
    recursion depth mismatch (before=312, after=361)" (cpython gh-106905, fixed in later
    releases; 1 CI run in 5). Imported here, no test compiles it deep in a stack. ~3 s,
    so a unit-only session skips it.
    """
    if any(item.get_closest_marker("unit") is None for item in session.items):
        import prefect.server.api.server  # noqa: F401


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA


# --- the hostile tier's figures (tests/hostile/tally.py) ------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--hostile-report",
        default=None,
        help="write the hostile tier's figures (inputs tried, faults injected, runs under "
        "load, rows lost) as Markdown to this path, and JSON next to it",
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    from hostile.scale import scale_name
    from hostile.tally import TALLY

    rows = TALLY.rows()
    if not rows:
        return
    terminalreporter.section("hostile tier figures")
    for area, measure, value in rows:
        terminalreporter.write_line(f"{area:<40} {measure:<24} {value:>14,.0f}")
    path = config.getoption("--hostile-report")
    if path:
        outcome = "passed" if exitstatus == 0 else f"exit status {exitstatus}"
        TALLY.write(Path(path), scale_name(), outcome)
        terminalreporter.write_line(f"wrote {path}")
