"""One exception tree for toolwire, with deterministic error codes.

Every error carries a ``code`` (a stable string users can grep and SQL can
group by) and knows whether it is *transient* (worth retrying the same call:
Prefect's retry condition reads this) or *terminal*.
"""

from __future__ import annotations

from dataclasses import dataclass

# Protocol / parse codes (seed 002, seed 001, seed 000, seed 003).
LIBRARIAN_PROTOCOL_INVALID = "LIBRARIAN_PROTOCOL_INVALID"
LIBRARIAN_PARSE_FAILED = "LIBRARIAN_PARSE_FAILED"

# Provider faults (seed 002 names the first two).
LLM_PROVIDER_TIMEOUT = "LLM_PROVIDER_TIMEOUT"
LLM_PROVIDER_UNREACHABLE = "LLM_PROVIDER_UNREACHABLE"
LLM_PROVIDER_TRANSIENT = "LLM_PROVIDER_TRANSIENT"  # 429 / 5xx
LLM_PROVIDER_ERROR = "LLM_PROVIDER_ERROR"  # 4xx and other terminal faults
LLM_PROVIDER_CRASHED = "LLM_PROVIDER_CRASHED"  # the local model's worker process died
REPLAY_EXHAUSTED = "REPLAY_EXHAUSTED"

SPEC_INVALID = "SPEC_INVALID"
PACK_INVALID = "PACK_INVALID"
PROMPT_BINDING_ERROR = "PROMPT_BINDING_ERROR"
STORE_LOCKED = "STORE_LOCKED"
STORE_ERROR = "STORE_ERROR"
WORKSPACE_ERROR = "WORKSPACE_ERROR"
PATH_OUTSIDE_WORKSPACE = "PATH_OUTSIDE_WORKSPACE"
RUN_NOT_FOUND = "RUN_NOT_FOUND"
USAGE_ERROR = "USAGE_ERROR"
INTERNAL_ERROR = "INTERNAL_ERROR"  # an exception toolwire did not foresee


class ToolwireError(Exception):
    """Base of every error toolwire raises on purpose."""

    code: str = "TOOLWIRE_ERROR"
    transient: bool = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class UsageError(ToolwireError):
    """The user asked for something that cannot work (bad flag, missing file)."""

    code = USAGE_ERROR


@dataclass(frozen=True, slots=True)
class SpecIssue:
    """One problem in a spec file, located for an editor."""

    file: str
    line: int | None
    column: int | None
    path: str  # dotted key path, e.g. "tools[0].args.properties"
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        key = f" {self.path}:" if self.path else ""
        return f"{where}:{key} {self.message}"


class SpecError(ToolwireError):
    """A spec failed to load or validate; ``issues`` lists every problem found."""

    code = SPEC_INVALID

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        first = str(issues[0]) if issues else "invalid spec"
        more = f" (+{len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(first + more)


class PackError(ToolwireError):
    """A prompt pack is malformed (manifest, stage file, missing file)."""

    code = PACK_INVALID


class PromptBindingError(PackError):
    """A template names a binding that was not given, or a given one is unused."""

    code = PROMPT_BINDING_ERROR


class ProtocolError(ToolwireError):
    """The model's text does not follow the wire protocol.

    ``message`` is written for the model to act on (it goes into repair
    prompts); ``details`` are machine codes such as ``MISSING_TAG:warnings``.
    """

    transient = False

    def __init__(
        self,
        code: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        details: list[str] | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.line = line
        self.column = column
        self.details = list(details or [])

    def __str__(self) -> str:
        where = f" (at line {self.line}, column {self.column})" if self.line else ""
        return f"{self.code}: {self.message}{where}"

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "details": list(self.details),
        }


class ProviderError(ToolwireError):
    """A model call failed for a reason outside the model's text."""

    code = LLM_PROVIDER_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        transient: bool | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, code=code)
        if transient is not None:
            self.transient = transient
        self.status_code = status_code


class ProviderTimeout(ProviderError):
    code = LLM_PROVIDER_TIMEOUT
    transient = True


class ProviderUnreachable(ProviderError):
    code = LLM_PROVIDER_UNREACHABLE
    transient = False


class StoreError(ToolwireError):
    code = STORE_ERROR


class StoreLocked(StoreError):
    """Another process holds the DuckDB file's write lock past our wait budget."""

    code = STORE_LOCKED


class WorkspaceError(ToolwireError):
    code = WORKSPACE_ERROR


class PathOutsideWorkspace(WorkspaceError):
    code = PATH_OUTSIDE_WORKSPACE


class RunNotFound(ToolwireError):
    code = RUN_NOT_FOUND


def is_transient(exc: BaseException) -> bool:
    """Prefect ``retry_condition_fn`` helper: retry only what may succeed next time."""
    return isinstance(exc, ToolwireError) and exc.transient
