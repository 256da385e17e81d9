"""Process settings from ``TOOLWIRE_*`` environment variables, and who wins when they clash.

Precedence for a run's model and transport, highest first:

1. the CLI flag (``--model PROVIDER:NAME``, ``--tooling-transport T``),
2. the environment (``TOOLWIRE_MODEL``, ``TOOLWIRE_TRANSPORT``),
3. the spec (``model.name``, ``transport``),
4. the spec model's defaults (for everything else in ``model``).

An override replaces only the model *name*; temperature, max_tokens, grammar
and the rest still come from the spec. ``TOOLWIRE_OPENAI_BASE_URL`` sets the
base URL of an ``openai:`` model (environment beats spec). A ``replay:PATH``
given on the CLI or in the environment is relative to the current directory
(not to the spec file), so it is made absolute here; so is a ``llamacpp:`` GGUF
path. Empty variables count as unset. The API key is a SecretStr: ``repr`` and
``model_dump`` show asterisks; :func:`secret_values` hands the raw strings to
redacting writers and loggers.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from toolwire.domain import TRANSPORTS
from toolwire.errors import UsageError
from toolwire.spec.locations import default_db_path, store_file_problem
from toolwire.spec.model import ModelConfig, Spec
from toolwire.spec.paths import replay_file_problem
from toolwire.spec.values import MAX_TIMEOUT_S, base_url_problem, refusing, user_id_problem

__all__ = ["Settings", "load_settings", "resolve_model_and_transport", "secret_values"]

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class Settings(BaseSettings):
    """Everything toolwire reads from the environment; CLI flags override per command."""

    model_config = SettingsConfigDict(
        env_prefix="TOOLWIRE_",
        env_ignore_empty=True,
        extra="ignore",
        populate_by_name=True,  # Settings(openai_api_key=...) works despite the alias
    )

    db: Path = Field(default_factory=default_db_path)  # per-user, not per-cwd
    model: str | None = None
    transport: str | None = None
    # The conventional OPENAI_API_KEY is honoured when the prefixed one is absent.
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("TOOLWIRE_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = None
    log_level: str = "WARNING"
    user: str = "default"
    # At most a day (inf or 1e308 passed, then raised OverflowError from a lock wait).
    db_lock_timeout_s: float = Field(default=30.0, ge=0, le=MAX_TIMEOUT_S)
    # Prompts and raw replies (attempts, tool calls) are kept for the last this-many ok
    # runs and for every failed run; older ok runs keep their rows, counts and reports.
    # Bounded so a typo is refused at start, not met by DuckDB's BIGINT at the run's end.
    keep_raw_runs: int = Field(default=50, ge=1, le=1_000_000)
    # Cached embeddings no run has used for more than this many days are deleted after an
    # ok librarian run (0: never), so a vault edited daily does not grow the store forever.
    # At most 100 years (a date further back than that overflows the calendar).
    keep_embeddings_days: int = Field(default=30, ge=0, le=36_500)
    # A spec's `python:module:function` tools run code with the model's arguments; specs
    # are untrusted, so they run only when the user opts in here (never in a spec).
    allow_python_tools: bool = False

    _check_user = field_validator("user")(refusing(user_id_problem))
    _check_db = field_validator("db")(refusing(store_file_problem))

    @field_validator("openai_api_key")
    @classmethod
    def _check_api_key(cls, value: SecretStr | None) -> SecretStr | None:
        # It travels as an HTTP header: a newline or a space failed the first model call
        # (after the notes were read) with an error that quoted the key, a non-ASCII
        # letter as INTERNAL_ERROR. The message never shows the key.
        raw = None if value is None else value.get_secret_value()
        if raw is not None and not all(33 <= ord(c) < 127 for c in raw):
            raise ValueError("an API key is printable ASCII without spaces (key not shown)")
        return value

    # Checked here, not at the first model call after the notes were read.
    _check_base_url = field_validator("openai_base_url")(refusing(base_url_problem))

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"expected one of {', '.join(_LOG_LEVELS)}")
        return level


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus explicit overrides); a bad value is a UsageError."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"{_variable(e['loc'])}: " + str(e["msg"]).removeprefix("Value error, ")
            for e in exc.errors(include_url=False)
        )
        raise UsageError(f"invalid setting: {problems}") from None


def _variable(loc: tuple[int | str, ...]) -> str:
    """The variable a settings error is about."""
    name = "_".join(str(p) for p in loc).upper()
    if name in ("OPENAI_API_KEY", "TOOLWIRE_OPENAI_API_KEY"):  # the alias: either one
        return "TOOLWIRE_OPENAI_API_KEY (or OPENAI_API_KEY)"
    return f"TOOLWIRE_{name}"


def secret_values(settings: Settings) -> list[str]:
    """The raw secret strings in ``settings``, for redaction (never for printing)."""
    values: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr) and value.get_secret_value():
            values.append(value.get_secret_value())
    return values


def _absolute_replay(name: str) -> str:
    provider, _, target = name.partition(":")
    if provider == "replay" and target:
        return f"replay:{Path(target).resolve()}"
    # A GGUF path typed on the command line is the user's, relative to where they are:
    # `--model llamacpp:./my.gguf` read "no GGUF file at <spec folder>/my.gguf" while the
    # file was right there. A bundled name (no / and no .gguf) stays a name.
    if provider == "llamacpp" and ("/" in target or target.endswith(".gguf")):
        return f"llamacpp:{Path(target).expanduser().resolve()}"
    return name


def resolve_model_and_transport(
    spec: Spec, settings: Settings, cli_model: str | None, cli_transport: str | None
) -> tuple[ModelConfig, str]:
    """The model config and transport a run uses (precedence: CLI > env > spec > default)."""
    model = spec.model
    source, override = ("--model", cli_model) if cli_model else ("TOOLWIRE_MODEL", settings.model)
    if override:
        data = model.model_dump(by_alias=True)
        data["name"] = _absolute_replay(override)
        try:
            model = ModelConfig.model_validate(data)
        except ValidationError as exc:
            reason = exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
            raise UsageError(f"{source} {override!r}: {reason}") from None
        if model.provider == "replay":  # absolute (_absolute_replay)
            problem = replay_file_problem(Path(model.target))
            if problem:
                raise UsageError(f"{source} {override!r}: {problem}")
    if settings.openai_base_url and model.provider == "openai":
        model = model.model_copy(update={"base_url": settings.openai_base_url})

    if cli_transport:
        source, transport = "--tooling-transport", cli_transport
    elif settings.transport:
        source, transport = "TOOLWIRE_TRANSPORT", settings.transport
    else:
        source, transport = "spec", spec.transport
    if transport not in TRANSPORTS:
        raise UsageError(
            f"{source}: unknown transport {transport!r}; expected one of {', '.join(TRANSPORTS)}"
        )
    return model, transport
