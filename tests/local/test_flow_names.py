"""Prefect-facing names (#19 item 3) and one-line typed faults in Prefect's log (#20 item 1)."""

from __future__ import annotations

import logging
import sys

import pytest

pytestmark = pytest.mark.local  # imports Prefect


def test_task_names_are_stable_and_runs_keep_their_number() -> None:
    from toolwire.flows.job_flows import stable_task_name

    assert stable_task_name("turn-7") == "turn"
    assert stable_task_name("turn-12") == "turn"
    assert stable_task_name("load-workspace") == "load-workspace"  # no number: unchanged
    assert stable_task_name("apply") == "apply"
    # An agent's repair of turn 3 is the same task on every run, whichever turn and try.
    assert stable_task_name("turn-3-repair-1") == stable_task_name("turn-9-repair-2")
    assert stable_task_name("turn-3-repair-1") == "turn-repair"


def test_one_artifact_key_per_job_and_spec() -> None:
    from toolwire.flows.job_flows import spec_artifact_key

    key = spec_artifact_key("librarian", "Librarian Nightly_v2")
    assert key == "librarian-librarian-nightly-v2"
    assert key == spec_artifact_key("librarian", "Librarian Nightly_v2")  # no run id in it
    assert spec_artifact_key("agent", "x") != spec_artifact_key("librarian", "x")


def test_typed_faults_reach_prefect_logs_without_a_traceback() -> None:
    from toolwire.errors import ProviderUnreachable
    from toolwire.flows.job_flows import quiet_expected_failures

    quiet_expected_failures()
    quiet_expected_failures()  # idempotent
    logger = logging.getLogger("prefect.task_runs")
    assert sum(type(f).__name__ == "_OneLineToolwireFailures" for f in logger.filters) == 1

    def record_for(exc: BaseException) -> logging.LogRecord:
        try:
            raise exc
        except BaseException:
            info = sys.exc_info()
        record = logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "failed", (), info)
        for f in logger.filters:
            f.filter(record)
        return record

    typed = record_for(ProviderUnreachable("cannot reach http://127.0.0.1:9/v1"))
    assert typed.exc_info is None and typed.getMessage() == "failed"
    bug = record_for(KeyError("a bug keeps its traceback"))
    assert bug.exc_info is not None
