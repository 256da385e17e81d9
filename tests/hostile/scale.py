"""How hard the hostile tier pushes: bounded in the suite, longer on demand.

``TOOLWIRE_HOSTILE_SCALE=long`` (``scripts/hostile``) multiplies every fuzz
budget; the suite default keeps the whole tier within a few minutes on a
2-core machine. Load sizes are the issue's (1,000 runs, 10,000 notes) at every
scale: they are what the tier proves.
"""

from __future__ import annotations

import os

__all__ = ["LONG", "fuzz_examples", "scale_name"]

LONG = os.environ.get("TOOLWIRE_HOSTILE_SCALE", "suite").strip().lower() == "long"
_FUZZ_FACTOR = 40 if LONG else 1


def scale_name() -> str:
    return "long" if LONG else "suite"


def fuzz_examples(suite: int) -> int:
    """Hypothesis ``max_examples`` for a fuzz target: ``suite`` in the suite, 40x when long."""
    return suite * _FUZZ_FACTOR
