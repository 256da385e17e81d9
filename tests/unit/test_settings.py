"""Settings: TOOLWIRE_* environment, secret handling, CLI > env > spec > default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolwire.errors import UsageError
from toolwire.spec.locations import default_db_path
from toolwire.spec.model import Spec, load_spec_text
from toolwire.spec.settings import (
    Settings,
    load_settings,
    resolve_model_and_transport,
    secret_values,
)

pytestmark = pytest.mark.unit

SPEC_TEXT = """
name: s
version: 1
transport: xml_attrless
model: {name: "llamacpp:smollm2-135m", temperature: 0.3, max_tokens: 99}
prompt_pack: p
taxonomy: {topics: [a, b]}
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TOOLWIRE_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


@pytest.fixture
def spec() -> Spec:
    return load_spec_text(SPEC_TEXT).spec


def test_defaults_without_environment() -> None:
    s = load_settings()
    assert s.db == default_db_path()  # per-user (tests/unit/test_locations.py)
    assert (s.model, s.transport, s.openai_api_key, s.openai_base_url) == (None,) * 4
    assert (s.log_level, s.user, s.db_lock_timeout_s) == ("WARNING", "default", 30.0)


def test_environment_is_read_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_DB", "/tmp/x.duckdb")
    monkeypatch.setenv("TOOLWIRE_LOG_LEVEL", "debug")
    monkeypatch.setenv("TOOLWIRE_USER", "ana")
    monkeypatch.setenv("TOOLWIRE_DB_LOCK_TIMEOUT_S", "2.5")
    monkeypatch.setenv("TOOLWIRE_MODEL", "")  # empty counts as unset
    s = load_settings()
    assert (s.db, s.log_level, s.user, s.db_lock_timeout_s) == (
        Path("/tmp/x.duckdb"), "DEBUG", "ana", 2.5,
    )  # fmt: skip
    assert s.model is None


@pytest.mark.parametrize(
    ("var", "value", "fragment"),
    [
        ("TOOLWIRE_LOG_LEVEL", "loud", "TOOLWIRE_LOG_LEVEL"),
        ("TOOLWIRE_DB_LOCK_TIMEOUT_S", "soon", "TOOLWIRE_DB_LOCK_TIMEOUT_S"),
        # Found at the end of a run before (an OverflowError after the notes were judged,
        # and a swallowed DuckDB conversion error): refused before the run starts.
        ("TOOLWIRE_KEEP_EMBEDDINGS_DAYS", "99999999999", "less than or equal to 36500"),
        ("TOOLWIRE_KEEP_RAW_RUNS", "99999999999999999999999", "less than or equal to 1000000"),
        ("TOOLWIRE_KEEP_RAW_RUNS", "0", "greater than or equal to 1"),
    ],
)
def test_bad_environment_value_is_usage_error(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(UsageError, match=fragment):
        load_settings()


def test_openai_key_fallback_and_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-plain")
    assert secret_values(load_settings()) == ["sk-plain"]
    monkeypatch.setenv("TOOLWIRE_OPENAI_API_KEY", "sk-prefixed")
    assert secret_values(load_settings()) == ["sk-prefixed"]


def test_secret_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_OPENAI_API_KEY", "sk-very-secret")
    s = load_settings()
    shown = [repr(s), str(s), str(s.model_dump()), s.model_dump_json(), str(s.openai_api_key)]
    assert all("sk-very-secret" not in text for text in shown)
    assert secret_values(s) == ["sk-very-secret"]
    assert secret_values(Settings(openai_api_key=None)) == []


@pytest.mark.parametrize(
    ("cli", "env", "expected"),
    [
        (None, None, "llamacpp:smollm2-135m"),  # spec
        (None, "openai:gpt-env", "openai:gpt-env"),  # env beats spec
        ("openai:gpt-cli", "openai:gpt-env", "openai:gpt-cli"),  # CLI beats env
        ("openai:gpt-cli", None, "openai:gpt-cli"),
    ],
)
def test_model_precedence(
    monkeypatch: pytest.MonkeyPatch, spec: Spec, cli: str | None, env: str | None, expected: str
) -> None:
    if env:
        monkeypatch.setenv("TOOLWIRE_MODEL", env)
    model, _ = resolve_model_and_transport(spec, load_settings(), cli, None)
    assert model.name == expected
    # Only the name is overridden: the spec's decoding settings stay.
    assert (model.temperature, model.max_tokens) == (0.3, 99)


@pytest.mark.parametrize(
    ("cli", "env", "expected"),
    [
        (None, None, "xml_attrless"),
        (None, "xct", "xct"),
        ("native", "xct", "native"),
        ("xml-final", None, "xml-final"),
    ],
)
def test_transport_precedence(
    monkeypatch: pytest.MonkeyPatch, spec: Spec, cli: str | None, env: str | None, expected: str
) -> None:
    if env:
        monkeypatch.setenv("TOOLWIRE_TRANSPORT", env)
    _, transport = resolve_model_and_transport(spec, load_settings(), None, cli)
    assert transport == expected


def test_spec_defaults_fill_what_nobody_set() -> None:
    spec = load_spec_text("name: d\nversion: 1\ntransport: xct\nmodel: openai:m\nprompt_pack: p\n")
    model, transport = resolve_model_and_transport(spec.spec, load_settings(), None, None)
    assert (model.max_tokens, model.timeout_s, model.constrain, transport) == (
        512, 120.0, "grammar", "xct",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("cli", "env", "fragment"),
    [
        ("json", None, "--tooling-transport: unknown transport 'json'"),
        (None, "XML", "TOOLWIRE_TRANSPORT: unknown transport 'XML'"),
    ],
)
def test_bad_transport_is_usage_error(
    monkeypatch: pytest.MonkeyPatch, spec: Spec, cli: str | None, env: str | None, fragment: str
) -> None:
    if env:
        monkeypatch.setenv("TOOLWIRE_TRANSPORT", env)
    with pytest.raises(UsageError, match=fragment):
        resolve_model_and_transport(spec, load_settings(), None, cli)


def test_bad_model_override_is_usage_error(monkeypatch: pytest.MonkeyPatch, spec: Spec) -> None:
    with pytest.raises(UsageError, match="--model 'claude:x': unknown provider 'claude'"):
        resolve_model_and_transport(spec, load_settings(), "claude:x", None)
    monkeypatch.setenv("TOOLWIRE_MODEL", "gpt-4o")
    with pytest.raises(UsageError, match="TOOLWIRE_MODEL 'gpt-4o': expected 'provider:name'"):
        resolve_model_and_transport(spec, load_settings(), None, None)


def test_cli_replay_path_is_relative_to_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spec: Spec
) -> None:
    monkeypatch.chdir(tmp_path)
    model, _ = resolve_model_and_transport(spec, load_settings(), "replay:c/run.jsonl", None)
    assert model.provider == "replay"
    assert Path(model.target) == (tmp_path / "c" / "run.jsonl").resolve()


def test_openai_base_url_applies_to_openai_models_only(
    monkeypatch: pytest.MonkeyPatch, spec: Spec
) -> None:
    monkeypatch.setenv("TOOLWIRE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    local, _ = resolve_model_and_transport(spec, load_settings(), None, None)
    assert local.base_url is None
    remote, _ = resolve_model_and_transport(spec, load_settings(), "openai:m", None)
    assert remote.base_url == "http://127.0.0.1:9/v1"
