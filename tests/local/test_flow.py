"""The librarian as a real Prefect flow (temporary local server, no `prefect server start`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_librarian_replay import MALFORMED, VALID, _spec, _workspace

pytestmark = pytest.mark.local


def test_flow_run_is_stored_with_its_prefect_flow_run_id(tmp_path: Path) -> None:
    from toolwire.flows import run_librarian_flow
    from toolwire.store import Store

    ws = _workspace(tmp_path)
    db = tmp_path / "store.duckdb"
    seen: list[tuple[int, int]] = []
    result = run_librarian_flow(
        _spec(tmp_path, [MALFORMED, VALID]),
        workspace=str(ws),
        db=str(db),
        on_turn=lambda done, total: seen.append((done, total)),
    )
    assert result.status == "ok"
    assert seen == [(1, 1)]
    _, rows = Store(db).query(
        "select flow_run_id, status, turns from runs where run_id = ?", [result.run_id]
    )
    flow_run_id, status, turns = rows[0]
    assert (status, turns) == ("ok", 1)
    assert flow_run_id is not None and len(flow_run_id) == 36  # a UUID from Prefect
    _, attempts = Store(db).query("select count(*) from attempts where run_id = ?", [result.run_id])
    assert attempts == [(2,)]


class _Scripted:
    """Raises the given errors in order, then answers: the retry wiring's test double."""

    name = "scripted"
    supports_grammar = False

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    def complete(self, request):  # noqa: ANN001, ANN201
        from toolwire.domain import Completion

        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return Completion(text="answer")


def test_model_call_task_retries_transient_faults_but_not_terminal_ones() -> None:
    from prefect import flow

    from toolwire.domain import CompletionRequest
    from toolwire.errors import ProviderError
    from toolwire.flows.model_call import model_call

    flaky = _Scripted(
        [ProviderError("503 from server", code="LLM_PROVIDER_TRANSIENT", transient=True)]
    )
    terminal = _Scripted([ProviderError("400 bad request", status_code=400)])

    @flow
    def call_flaky() -> str:
        return model_call(flaky, CompletionRequest(messages=[])).text

    @flow
    def call_terminal() -> str:
        return model_call(terminal, CompletionRequest(messages=[])).text

    assert call_flaky() == "answer"
    assert flaky.calls == 2
    with pytest.raises(ProviderError, match="400 bad request"):
        call_terminal()
    assert terminal.calls == 1


def test_the_edge_hands_its_wrapper_in_and_it_is_a_task_only_inside_a_run() -> None:
    # Issue 40: the core never looks for Prefect; the flows pass this wrapper to run_job.
    from prefect import flow

    from toolwire.flows.model_call import PrefectProvider, with_prefect_retries
    from toolwire.providers.retrying import RetryingProvider

    plain = _Scripted([])
    outside = with_prefect_retries(plain)  # type: ignore[arg-type]
    assert isinstance(outside, RetryingProvider)

    @flow
    def wrap_inside() -> object:
        return with_prefect_retries(plain)  # type: ignore[arg-type]

    inside = wrap_inside()
    assert isinstance(inside, PrefectProvider) and inside.inner is plain
    assert with_prefect_retries(inside) is inside  # never two wrappers
