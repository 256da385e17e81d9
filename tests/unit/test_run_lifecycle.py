"""The run pipeline's pure parts (issue 17): retry policy, injected faults, checks, job table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolwire.agent.checks import RUN_CHECK_FAILED, check_problems, run_checks
from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import LLM_PROVIDER_ERROR, LLM_PROVIDER_TIMEOUT, ProviderError, UsageError
from toolwire.jobs import JOBS, RunOptions, job_for
from toolwire.providers.replay import ReplayProvider
from toolwire.providers.retrying import (
    MODEL_CALL_POLICY,
    RetryingProvider,
    with_retries,
)
from toolwire.run.base import resolve_spec
from toolwire.spec.model import CheckSpec, canonical_json, load_spec_text
from toolwire.spec.settings import load_settings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
REQUEST = CompletionRequest(messages=[{"role": "user", "content": "hi"}])


def _replay(tmp_path: Path, *lines: str) -> ReplayProvider:
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ReplayProvider(script)


# -- the retry policy outside Prefect -------------------------------------------------------


def test_policy_is_three_attempts_backing_off_one_then_four_seconds() -> None:
    assert (MODEL_CALL_POLICY.attempts, MODEL_CALL_POLICY.retries) == (3, 2)
    assert [MODEL_CALL_POLICY.delay(n) for n in (1, 2)] == [1.0, 4.0]


def test_an_injected_timeout_is_retried_with_the_policys_delays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slept: list[float] = []
    inner = _replay(tmp_path, '{"fault": "timeout"}', '{"fault": "transient"}', '{"text": "ok"}')
    provider = RetryingProvider(inner, sleep=slept.append)
    with caplog.at_level(logging.WARNING, logger="toolwire.providers"):
        assert provider.complete(REQUEST).text == "ok"
    assert slept == [1.0, 4.0]
    assert [r.getMessage() for r in caplog.records] == [
        "model call failed (LLM_PROVIDER_TIMEOUT), attempt 1 of 3; retrying in 1 s",
        "model call failed (LLM_PROVIDER_TRANSIENT), attempt 2 of 3; retrying in 4 s",
    ]


def test_the_third_transient_fault_is_the_runs_and_terminal_faults_are_not_retried(
    tmp_path: Path,
) -> None:
    slept: list[float] = []
    lines = ['{"fault": "timeout"}'] * 3 + ['{"text": "too late"}']
    provider = RetryingProvider(_replay(tmp_path, *lines), sleep=slept.append)
    with pytest.raises(ProviderError) as info:
        provider.complete(REQUEST)
    assert info.value.code == LLM_PROVIDER_TIMEOUT and slept == [1.0, 4.0]

    slept.clear()
    terminal = RetryingProvider(
        _replay(tmp_path, '{"fault": "error"}', '{"text": "x"}'), sleep=slept.append
    )
    with pytest.raises(ProviderError) as info:
        terminal.complete(REQUEST)
    assert info.value.code == LLM_PROVIDER_ERROR and slept == []


def test_the_core_wrapper_is_plain_retries_and_never_doubles(tmp_path: Path) -> None:
    inner = _replay(tmp_path, '{"text": "ok"}')
    wrapped = with_retries(inner)
    assert isinstance(wrapped, RetryingProvider) and with_retries(wrapped) is wrapped
    assert wrapped.name == inner.name and wrapped.remaining == 1  # extras pass through


def test_a_bad_fault_line_names_its_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"script.jsonl:1: a fault line"):
        _replay(tmp_path, '{"fault": "meteor"}')
    with pytest.raises(UsageError, match=r"script.jsonl:1: a fault line"):
        _replay(tmp_path, '{"fault": "timeout", "text": "x"}')


def test_replayed_faults_are_typed_like_real_ones(tmp_path: Path) -> None:
    provider = _replay(tmp_path, '{"fault": "timeout"}', '{"text": "after"}')
    with pytest.raises(ProviderError) as info:
        provider.complete(REQUEST)
    assert info.value.transient and info.value.code == LLM_PROVIDER_TIMEOUT
    assert provider.complete(REQUEST) == Completion(text="after", model=provider.name)


# -- checks ---------------------------------------------------------------------------------


def _notes(root: Path) -> Path:
    for rel in ("notes/a.md", "notes/sub/b.md", "notes/.hidden/c.md", "notes/x.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# t\n", encoding="utf-8")
    return root


def test_checks_want_the_file_and_every_match_named(tmp_path: Path) -> None:
    root = _notes(tmp_path)
    checks = [CheckSpec(file="index.md", lists="notes/**/*.md")]
    assert check_problems(checks, root) == ["index.md does not exist"]
    (root / "index.md").write_text("- notes/a.md: t\n", encoding="utf-8")
    assert check_problems(checks, root) == [
        "index.md does not list 1 of the files matching notes/**/*.md: notes/sub/b.md"
    ]
    (root / "index.md").write_text("- notes/a.md\n- notes/sub/b.md\n", encoding="utf-8")
    assert run_checks(checks, root) is None


def test_a_failed_check_is_the_runs_error_with_its_code(tmp_path: Path) -> None:
    error = run_checks([CheckSpec(file="index.md")], tmp_path)
    assert error is not None and error.code == RUN_CHECK_FAILED
    assert "index.md does not exist" in error.message


def test_a_check_never_reads_through_a_link_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("notes/a.md", encoding="utf-8")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "index.md").symlink_to(outside)
    problems = check_problems([CheckSpec(file="index.md")], root)
    assert len(problems) == 1 and problems[0].startswith("index.md cannot be read")


def test_a_spec_without_checks_keeps_its_hash() -> None:
    text = (REPO / "specs" / "agent-xct.yaml").read_text("utf-8")
    head = text[: text.index("# Whether the job was done")]
    plain = load_spec_text(head, base_dir=REPO / "specs")
    checked = load_spec_text(text, base_dir=REPO / "specs")
    assert plain.spec.checks == [] and len(checked.spec.checks) == 1
    assert '"checks"' not in canonical_json(plain.spec) and plain.hash != checked.hash


# -- the job table ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "override", "job"),
    [
        ("librarian.yaml", None, "librarian"),
        ("agent-xct.yaml", None, "agent"),
        ("agent-xct.yaml", "xml_attrless", "librarian"),
        ("librarian-replay.yaml", "native", "agent"),
    ],
)
def test_one_table_dispatches_by_transport(spec: str, override: str | None, job: str) -> None:
    resolved = resolve_spec(REPO / "specs" / spec, load_settings(), None, override)
    assert job_for(resolved).name == job


def test_every_transport_has_exactly_one_job() -> None:
    from toolwire.domain import TRANSPORTS

    speakers = [t for job in JOBS.values() for t in job.transports]
    assert sorted(speakers) == sorted(TRANSPORTS)


def test_dry_run_is_a_librarian_flag() -> None:
    agent, librarian = JOBS["agent"], JOBS["librarian"]
    dry = RunOptions("s.yaml", dry_run=True)
    assert librarian.writes_workspace(dry) is False and agent.writes_workspace(dry) is True
    with pytest.raises(UsageError, match="librarian"):
        agent.prepare(dry, load_settings())
