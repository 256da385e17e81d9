"""Spec values and TOOLWIRE_* settings pushed to extremes are refused at load time, each
with one message naming the field and what it allows (safety round four).

Every bad value here once passed validation and then failed deep in a run (after the
notes were read), crashed a worker, or was silently read as another value.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolwire.errors import SpecError, UsageError
from toolwire.spec.model import load_spec_text
from toolwire.spec.settings import load_settings, resolve_model_and_transport

pytestmark = pytest.mark.unit

SPEC = """\
name: s
version: "1"
transport: xml_attrless
model:
  name: "llamacpp:smollm2-135m"
  max_tokens: 256
prompt_pack: p
taxonomy: {topics: [a, b]}
"""
AGENT = """\
name: t
version: "1"
transport: xml
model: "replay:x.jsonl"
prompt_pack: p
tools:
  - name: read_file
    description: Read.
    implementation: builtin:read_file
    timeout_s: 10
"""
SCHEDULED = SPEC + 'schedule: {cron: "0 6 * * *", workspace: ., parameters: PARAMS}\n'


def _issues(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_spec_text(text)
    return [f"{i.path}: {i.message}" for i in caught.value.issues]


def _with_model_line(line: str) -> str:
    return SPEC.replace("  max_tokens: 256\n", f"  {line}\n")


# (the model's line, a fragment of the one error it must give)
BAD_MODEL_VALUES = [
    ("max_tokens: 1000000000000000000000000000000", "model.max_tokens: Input should be less"),
    ("max_tokens: 1000001", "less than or equal to 1000000"),
    ("max_tokens: 1:30", "YAML reads 1:30 as a base-60 number (90); write 90"),
    ("max_tokens: 017", "YAML reads 017 as an octal number (15); write 15"),
    ("max_tokens: -017", "as an octal number (-15)"),
    ("temperature: 1:30.5", "as a base-60 number (90.5)"),
    ("seed: -1", "model.seed: Input should be greater than or equal to 0"),
    ("seed: 4294967295", "model.seed: Input should be less than or equal to 4294967294"),
    ("seed: 1000000000000000000000000000000", "model.seed: Input should be less"),
    ("n_threads: 1000000", "model.n_threads: Input should be less than or equal to 512"),
    ("timeout_s: 1.0e+308", "model.timeout_s: Input should be less than or equal to 86400"),
    ("timeout_s: 86401", "less than or equal to 86400"),
    ("base_url: notaurl", "model.base_url: expected an http:// or https:// URL with a host"),
    ("base_url: 'ftp://example.com/v1'", "expected an http:// or https:// URL"),
    ("base_url: 'http://'", "expected an http:// or https:// URL with a host"),
    ("base_url: 'http://[::1'", "model.base_url: not a URL"),
    ("base_url: 'http://h x/v1'", "no spaces or control characters"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_MODEL_VALUES)
def test_a_bad_model_value_is_one_located_error(line: str, fragment: str) -> None:
    issues = _issues(_with_model_line(line))
    assert len(issues) == 1 and fragment in issues[0], issues


# Values at the edges that are fine, and YAML spellings that mean what they say.
GOOD_MODEL_VALUES = [
    ("max_tokens: 1000000", ("max_tokens", 1_000_000)),
    ("max_tokens: 0x10", ("max_tokens", 16)),
    ("max_tokens: 1_000", ("max_tokens", 1_000)),
    ("max_tokens: 07", ("max_tokens", 7)),  # octal and decimal agree
    ("seed: 0", ("seed", 0)),
    ("seed: 4294967294", ("seed", 4_294_967_294)),
    ("n_threads: 512", ("n_threads", 512)),
    ("timeout_s: 86400", ("timeout_s", 86_400.0)),
    ("base_url: 'https://api.example.com/v1'", ("base_url", "https://api.example.com/v1")),
    ("base_url: 'http://127.0.0.1:8080/v1'", ("base_url", "http://127.0.0.1:8080/v1")),
]


@pytest.mark.parametrize(("line", "expected"), GOOD_MODEL_VALUES)
def test_a_model_value_at_its_bound_loads(line: str, expected: tuple[str, object]) -> None:
    model = load_spec_text(_with_model_line(line)).spec.model
    assert getattr(model, expected[0]) == expected[1]


@pytest.mark.parametrize(
    ("timeout", "fragment"),
    [("1.0e+308", "tools[0].timeout_s: Input should be less than or equal to 86400"),
     ("1:30", "YAML reads 1:30 as a base-60 number (90)")],
)  # fmt: skip
def test_a_tool_timeout_is_bounded(timeout: str, fragment: str) -> None:
    issues = _issues(AGENT.replace("timeout_s: 10", f"timeout_s: {timeout}"))
    assert len(issues) == 1 and fragment in issues[0], issues


@pytest.mark.parametrize(
    ("constraints", "fragment"),
    [
        ("{max_tool_calls_per_turn: 1000000}", "constraints.max_tool_calls_per_turn: Input "
         "should be less than or equal to 100"),
        ("{max_iterations: 1000000000000000000000000000000}", "constraints.max_iterations: "
         "Input should be less than or equal to 1000"),
    ],
)  # fmt: skip
def test_agent_limits_are_bounded(constraints: str, fragment: str) -> None:
    """A million calls a turn declared a million slots in the prompt (the store ran out of
    memory); `parse --spec` lists calls x iterations slots."""
    issues = _issues(AGENT + f"constraints: {constraints}\n")
    assert len(issues) == 1 and fragment in issues[0], issues


def test_agent_limits_at_their_bounds_load() -> None:
    text = AGENT + "constraints: {max_tool_calls_per_turn: 100, max_iterations: 1000}\n"
    limits = load_spec_text(text).spec.constraints
    assert (limits.max_tool_calls_per_turn, limits.max_iterations) == (100, 1000)


BAD_PARAMETERS = [
    ("{dry_run: 'yes'}", "schedule.parameters.dry_run: expected true or false, got 'yes'"),
    ("{commit: 1}", "schedule.parameters.commit: expected true or false, got 1"),
    ("{model: 5}", "schedule.parameters.model: expected a string, got 5"),
    ("{model: bogus}", "schedule.parameters.model: expected 'provider:name'"),
    ("{model: 'nope:x'}", "unknown provider 'nope'"),
    ("{transport: bogus}", "schedule.parameters.transport: unknown transport 'bogus'"),
    ("{user: '  '}", "schedule.parameters.user: a user id is not empty or blank"),
    ('{user: "a\\nb"}', "a user id is one line without control characters"),
]


@pytest.mark.parametrize(("params", "fragment"), BAD_PARAMETERS)
def test_schedule_parameters_are_the_flow_s_types(params: str, fragment: str) -> None:
    """They reach the flow only when the schedule fires: `spec check` says so now."""
    issues = _issues(SCHEDULED.replace("PARAMS", params))
    assert len(issues) == 1 and fragment in issues[0], issues


def test_good_schedule_parameters_load() -> None:
    params = "{model: 'openai:gpt-4o-mini', transport: xml_attrless, dry_run: true, user: ana}"
    schedule = load_spec_text(SCHEDULED.replace("PARAMS", params)).spec.schedule
    assert schedule is not None and schedule.parameters["user"] == "ana"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("TOOLWIRE_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    return monkeypatch


# (variable, value, a fragment of the one-line error)
BAD_SETTINGS = [
    ("TOOLWIRE_DB_LOCK_TIMEOUT_S", "inf", "TOOLWIRE_DB_LOCK_TIMEOUT_S: Input should be less"),
    ("TOOLWIRE_DB_LOCK_TIMEOUT_S", "1e308", "less than or equal to 86400"),
    ("TOOLWIRE_DB_LOCK_TIMEOUT_S", "nan", "TOOLWIRE_DB_LOCK_TIMEOUT_S: Input should be"),
    ("TOOLWIRE_USER", "   ", "TOOLWIRE_USER: a user id is not empty or blank"),
    ("TOOLWIRE_USER", "a\nb", "TOOLWIRE_USER: a user id is one line without control"),
    ("TOOLWIRE_USER", "u" * 201, "TOOLWIRE_USER: a user id has at most 200 characters"),
    ("TOOLWIRE_OPENAI_BASE_URL", "notaurl", "TOOLWIRE_OPENAI_BASE_URL: expected an http://"),
    ("TOOLWIRE_OPENAI_BASE_URL", "localhost:8080/v1", "expected an http:// or https:// URL"),
]


@pytest.mark.parametrize(("name", "value", "fragment"), BAD_SETTINGS)
def test_a_bad_setting_is_refused_at_start(
    clean_env: pytest.MonkeyPatch, name: str, value: str, fragment: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(UsageError) as caught:
        load_settings()
    assert fragment in caught.value.message and "Value error" not in caught.value.message


def test_settings_at_their_bounds_load(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TOOLWIRE_DB_LOCK_TIMEOUT_S", "86400")
    clean_env.setenv("TOOLWIRE_USER", "ü-ß bob")
    clean_env.setenv("TOOLWIRE_OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    s = load_settings()
    assert (s.db_lock_timeout_s, s.user, s.openai_base_url) == (
        86_400.0, "ü-ß bob", "http://127.0.0.1:8080/v1",
    )  # fmt: skip


# "One line" meant only "no \n": YAML's "\r", "\x85" (NEL) and "\u2028" break lines too.
LINE_BREAKS = ["\\r", "\\x85", "\\u2028", "\\0", "\\x1b[31m", "\\x7f"]


@pytest.mark.parametrize("escape", LINE_BREAKS)
def test_a_label_description_or_glob_is_one_line(escape: str) -> None:
    labels = SPEC.replace("topics: [a, b]", f'topics: [a, "b{escape}c"]')
    assert _issues(labels) == ["taxonomy.topics[1]: a label must be one non-empty line "
                               "without surrounding spaces"]  # fmt: skip
    described = SPEC.replace(
        "{topics: [a, b]}", f'{{topics: [a], descriptions: {{a: "x{escape}y"}}}}'
    )
    assert _issues(described) == ["taxonomy.descriptions.a: a description is one non-empty line"]
    globbed = SPEC + f'notes: {{include: ["*.md{escape}"]}}\n'
    assert "notes.include[0]: a glob is one non-empty line" in _issues(globbed)[0]


def test_a_tab_or_unicode_in_a_label_is_fine() -> None:
    text = SPEC.replace("topics: [a, b]", 'topics: ["a\\tb", "cooking 🍳", "données"]')
    assert load_spec_text(text).spec.taxonomy.topics[1] == "cooking 🍳"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('version: ""', "version: a version is one non-blank line of at most 100 characters"),
        ('version: "   "', "version: a version is one non-blank line"),
        ('version: "1\\n2"', "version: a version is one non-blank line"),
        (f'version: "{"v" * 101}"', "version: a version is one non-blank line"),
        ('goal: "   "', "goal: must not be blank"),
        ('scope: "\\t"', "scope: must not be blank"),
    ],
)
def test_version_goal_and_scope_say_something(line: str, fragment: str) -> None:
    """`version: ""` loaded though the JSON Schema said minLength 1; a blank goal made
    every request's task empty."""
    text = SPEC.replace('version: "1"', line) if line.startswith("version") else SPEC + line
    issues = _issues(text)
    assert len(issues) == 1 and fragment in issues[0], issues


def test_an_integer_version_still_loads() -> None:
    assert load_spec_text(SPEC.replace('version: "1"', "version: 12")).spec.version == "12"


@pytest.mark.parametrize("variable", ["TOOLWIRE_OPENAI_API_KEY", "OPENAI_API_KEY"])
@pytest.mark.parametrize("key", ["sk-secret\nX-Evil: 1", "sk-sécret", "   ", "sk secret", "sk\x7f"])
def test_an_api_key_that_cannot_be_a_header_is_refused_unshown(
    clean_env: pytest.MonkeyPatch, variable: str, key: str
) -> None:
    """A newline failed the first model call with an error quoting the key, a non-ASCII
    letter was an INTERNAL_ERROR: both after the notes were read."""
    clean_env.setenv(variable, key)
    with pytest.raises(UsageError) as caught:
        load_settings()
    message = caught.value.message
    assert message == (
        "invalid setting: TOOLWIRE_OPENAI_API_KEY (or OPENAI_API_KEY): an API key is "
        "printable ASCII without spaces (key not shown)"
    )


def test_a_usual_api_key_loads(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-proj-AbC_123-xyz")
    key = load_settings().openai_api_key
    assert key is not None and key.get_secret_value() == "sk-proj-AbC_123-xyz"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("llamacpp:./my.gguf", "llamacpp:{cwd}/my.gguf"),
     ("llamacpp:models/x.gguf", "llamacpp:{cwd}/models/x.gguf"),
     ("llamacpp:smollm2-135m", "llamacpp:smollm2-135m")],
)  # fmt: skip
def test_a_gguf_path_given_by_the_user_is_relative_to_where_they_are(
    clean_env: pytest.MonkeyPatch, given: str, expected: str
) -> None:
    """`--model llamacpp:./my.gguf` said "no GGUF file at <spec folder>/my.gguf" while the
    file was in the current directory (replay: paths were already made absolute)."""
    spec = load_spec_text(SPEC, base_dir=Path("/elsewhere")).spec
    model, _ = resolve_model_and_transport(spec, load_settings(), given, None)
    assert model.name == expected.format(cwd=Path.cwd().resolve())
