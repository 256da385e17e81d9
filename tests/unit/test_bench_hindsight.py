"""bench.vault_accuracy's "coverage at 95 %, threshold in hindsight": the share a
perfectly chosen threshold would apply; issue 28's notes read the gap from it."""

import pytest
from bench.vault_accuracy import hindsight_coverage

pytestmark = pytest.mark.unit


def test_the_best_threshold_stops_before_the_first_confident_error() -> None:
    conf = [0.99, 0.95, 0.9, 0.8, 0.7, 0.6]
    ok = [True, True, True, False, True, True]
    # Top 3 right (100 %); with the error, 3/4 and 5/6 are under 95 %.
    assert hindsight_coverage(conf, ok, 0.95) == 50.0
    # At 80 %, the whole list (5 of 6, 83 %) qualifies.
    assert hindsight_coverage(conf, ok, 0.80) == 100.0


def test_an_instrument_wrong_at_the_top_covers_nothing() -> None:
    assert hindsight_coverage([0.9, 0.5], [False, True], 0.95) == 0.0
    assert hindsight_coverage([], [], 0.95) != hindsight_coverage([], [], 0.95)  # nan
