"""A tool agent's own spec sections: its tools, the shape of its final report, and the
checks that prove a run did its job; strict pydantic models like ``sections``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from toolwire.spec.sections import (
    StrictModel,
    json_schema_problems,
    path_text,
    workspace_path_problem,
)
from toolwire.spec.values import MAX_TIMEOUT_S
from toolwire.spec.yaml_index import SpecValueError

__all__ = ["BUILTIN_TOOLS", "CheckSpec", "FinalReportSpec", "ReportFormat", "ToolSpec"]

ReportFormat = Literal["text", "markdown", "json", "slack-block-kit", "sub-agent", "tty", "pipe"]
BUILTIN_TOOLS: tuple[str, ...] = ("read_file", "write_file", "list_dir", "search_text")
_XML_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PY_IMPL = re.compile(r"^python:[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ToolSpec(StrictModel):
    """A tool the agent may call: its name doubles as an XML tag in xml/execute transports."""

    name: str = Field(json_schema_extra={"pattern": _XML_NAME.pattern})
    description: str
    args: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema (2020-12) of the arguments object",
    )
    implementation: str = Field(
        description="builtin:read_file|write_file|list_dir|search_text or python:module:function"
    )
    timeout_s: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_S)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _XML_NAME.match(value):
            raise ValueError(
                "a tool name must be usable as an XML tag: letters, digits and _, "
                "not starting with a digit"
            )
        return value

    @field_validator("args")
    @classmethod
    def _check_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = json_schema_problems(value)
        if not problems and value.get("type") != "object":
            problems = [(("type",), "tool arguments are an object: set type: object")]
        if problems:
            raise SpecValueError(problems)
        return value

    @field_validator("implementation")
    @classmethod
    def _check_implementation(cls, value: str) -> str:
        kind, _, rest = value.partition(":")
        if kind == "builtin" and rest in BUILTIN_TOOLS:
            return value
        if kind == "python" and _PY_IMPL.match(value):
            return value
        raise ValueError(
            f"expected builtin:{'|'.join(BUILTIN_TOOLS)} or python:module:function, got {value!r}"
        )


class FinalReportSpec(StrictModel):
    """How a tool agent's final report is shaped (seed 001's FINAL slot)."""

    format: ReportFormat = "text"
    # Aliased: a field called `schema` would shadow BaseModel.schema().
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and (problems := json_schema_problems(value)):
            raise SpecValueError(problems)
        return value


class CheckSpec(StrictModel):
    """What proves a run did its job, checked when it ends: a file the workspace must show
    (``file``, with ``lists`` or ``contains``) or the final answer's text (``answer_matches``,
    ``answer_schema``). A check that fails makes the run ``Failed`` (``RUN_CHECK_FAILED``);
    a run with no check ends ``unchecked``, never ``ok``."""

    file: str | None = Field(
        default=None, description="a file the run must leave, relative to the workspace"
    )
    lists: str | None = Field(
        default=None,
        description="a glob relative to the workspace: the file must name every match",
    )
    contains: str | None = Field(
        default=None, min_length=1, description="text the file must contain"
    )
    answer_matches: str | None = Field(
        default=None, min_length=1, description="a regex the final answer's text must match"
    )
    answer_schema: dict[str, Any] | None = Field(
        default=None, description="a JSON Schema the final answer (as JSON) must satisfy"
    )

    @field_validator("file", "lists")
    @classmethod
    def _inside_workspace(cls, value: str | None) -> str | None:
        # A check that reads outside the workspace checks nothing the run did (issue 30/13).
        if value is None:
            return value
        problem = workspace_path_problem(path_text(value))
        if problem is not None:
            raise ValueError(f"{value!r} {problem}")
        return value

    @field_validator("answer_matches")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("answer_schema")
    @classmethod
    def _check_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and (problems := json_schema_problems(value)):
            raise SpecValueError(problems)
        return value

    @model_validator(mode="after")
    def _one_subject(self) -> CheckSpec:
        subjects = [self.file, self.answer_matches, self.answer_schema]
        if sum(s is not None for s in subjects) != 1:
            raise ValueError("a check has exactly one of file, answer_matches or answer_schema")
        if self.file is None and (self.lists is not None or self.contains is not None):
            raise ValueError("lists and contains check a file: give file too")
        return self
