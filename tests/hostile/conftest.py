"""The hostile tier: every test here is marked ``hostile`` and counts what it tried.

The report options and the terminal summary live in ``tests/conftest.py``
(pytest only takes options from the root conftest); the tally is shared.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hostile.tally import TALLY, Tally

HERE = Path(__file__).resolve().parent
# tests/local/llama_server.py (the real llama.cpp server helper) is shared with this tier.
sys.path.insert(0, str(HERE.parent / "local"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.hostile)


@pytest.fixture(scope="session")
def tally() -> Tally:
    return TALLY
