"""toolwire's benchmarks: ``python -m bench`` measures every figure of issue 9 against
its baseline and writes ``bench/RESULTS.md`` and ``bench/results.json``.

Each figure is one module with ``run(fig, *, quick)``; ``FIGURES`` maps the
``--only`` keys to them, in the order they run (model-bound figures last).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["FIGURES", "figure_module"]

# (--only key, figure number in the issue, title), in run order.
FIGURES: tuple[tuple[str, int, str], ...] = (
    ("parse", 1, "Parsing: share of a replayed run, hostile input"),
    ("engine", 2, "Engine overhead per turn (replay, model excluded)"),
    ("store", 3, "Store at 1M rows"),
    ("startup", 8, "Start-up"),
    ("batch", 7, "Batch: 1,000 replayed runs"),
    ("walltime", 6, "Librarian wall time with the local model"),
    ("accuracy", 5, "Topic accuracy on real runbooks"),
    ("validity", 4, "Small-model validity, grammar vs none"),
    ("vault", 9, "Topic judgement on labelled vaults it was not tuned on (issue 28)"),
)

_MODULES = {
    "parse": "bench.fig1_parse",
    "engine": "bench.fig2_engine",
    "store": "bench.fig3_store",
    "validity": "bench.fig4_validity",
    "accuracy": "bench.fig5_accuracy",
    "walltime": "bench.fig6_walltime",
    "batch": "bench.fig7_batch",
    "startup": "bench.fig8_startup",
    "vault": "bench.vault_accuracy",
}


def figure_module(key: str) -> ModuleType:
    """The module that measures figure ``key`` (imported on demand: some are heavy)."""
    return importlib.import_module(_MODULES[key])
