"""Agent specs: pydantic models, YAML loading with file:line errors, canonical hash.

A spec is JSON data written in YAML. Every model forbids unknown keys and is
strict about types (``"12"`` is not a number), so a typo fails loudly instead
of silently running with a default. The hash is the sha256 of the canonical
JSON of the *validated* spec: comments, key order, quoting and layout do not
change it, any value does. Defaults are filled in before hashing, so writing a
default out explicitly keeps the hash; if toolwire ever changes a default,
specs relying on it hash differently, which is right: the behaviour changed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from toolwire.errors import SpecError, SpecIssue
from toolwire.promptpack.shipped import pack_dir_of
from toolwire.spec.agent_sections import BUILTIN_TOOLS, CheckSpec, FinalReportSpec, ToolSpec
from toolwire.spec.paths import replay_file_problem
from toolwire.spec.reorganize import IndexNotes, RelatedNotes, Reorganize
from toolwire.spec.sections import (
    DEFAULT_MAX_CHANGES,
    PROVIDERS,
    Constraints,
    Judgement,
    MemorySpec,
    ModelConfig,
    NoteConventions,
    NotesSpec,
    OperationKind,
    ScheduleSpec,
    StrictModel,
    Taxonomy,
    Transport,
    path_text,
    unique_problems,
)
from toolwire.spec.values import is_one_line
from toolwire.spec.yaml_index import SpecValueError, issues_from_validation, read_yaml

__all__ = [
    "BUILTIN_TOOLS",
    "CheckSpec",
    "MISSING",
    "PROVIDERS",
    "Constraints",
    "FinalReportSpec",
    "IndexNotes",
    "Judgement",
    "LoadedSpec",
    "NoteConventions",
    "NotesSpec",
    "ModelConfig",
    "OperationKind",
    "RelatedNotes",
    "Reorganize",
    "ScheduleSpec",
    "Spec",
    "Taxonomy",
    "ToolSpec",
    "Transport",
    "canonical_json",
    "diff_specs",
    "load_spec",
    "load_spec_text",
    "spec_hash",
    "spec_json_schema",
]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_VERSION_CHARS = 100
MAX_SPEC_BYTES = 8 * 1024 * 1024  # a spec is kilobytes; a prompt pack holds the long texts


def _version_to_str(value: Any) -> Any:
    # `version: 1` is natural to write; `version: 1.10` would silently become 1.1.
    if isinstance(value, bool):
        raise ValueError("version must be a string or an integer")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        message = "a float is ambiguous as a version (1.10 reads as 1.1)"
        raise ValueError(f'{message}; quote it: "{value}"')
    return value


Version = Annotated[
    str,
    BeforeValidator(_version_to_str),
    WithJsonSchema({"type": ["string", "integer"], "minLength": 1, "maxLength": 100}),
]


def _model_shorthand(value: Any) -> Any:
    # `model: "llamacpp:x"` and `model: {name: "llamacpp:x"}` are the same spec (same hash).
    return {"name": value} if isinstance(value, str) else value


class Spec(StrictModel):
    """One agent: who it talks to, over which transport, with which tools and limits."""

    name: str = Field(json_schema_extra={"pattern": _SLUG.pattern})
    version: Version
    description: str = ""
    transport: Transport
    model: Annotated[ModelConfig, BeforeValidator(_model_shorthand)]
    prompt_pack: str = Field(
        min_length=1,
        description="a prompt pack installed with toolwire, by name (librarian-small, "
        "librarian, agent), or a pack folder relative to the spec",
    )
    tools: list[ToolSpec] = Field(default_factory=list)
    taxonomy: Taxonomy | None = None
    constraints: Constraints = Field(default_factory=lambda: Constraints())
    judgement: Judgement | None = None  # the librarian uses Judgement() when absent
    goal: str = Field(
        default="Organize the notes by topic: give each note one topic from the taxonomy "
        "and a clear title.",
        min_length=1,
    )
    scope: str = Field(default="workspace", min_length=1)
    final_report: FinalReportSpec | None = None
    checks: list[CheckSpec] = Field(default_factory=list)
    schedule: ScheduleSpec | None = None
    memory: MemorySpec = Field(default_factory=lambda: MemorySpec())
    notes: NotesSpec = Field(default_factory=lambda: NotesSpec())
    reorganize: Reorganize | None = None  # related notes, ... (off when absent)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _SLUG.match(value):
            raise ValueError("a name is a slug: lowercase letters, digits, - and _ (max 64)")
        return value

    _check_prompt_pack = field_validator("prompt_pack")(path_text)

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        # The JSON Schema said minLength 1 while "" and "1\n2" loaded; a version is
        # printed in reports and run lists, one short line.
        if not is_one_line(value) or len(value) > MAX_VERSION_CHARS:
            raise ValueError(f"a version is one non-blank line of at most {MAX_VERSION_CHARS} "
                             "characters")  # fmt: skip
        return value

    @field_validator("goal", "scope")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():  # min_length=1 let "   " through: a request with no task
            raise ValueError("must not be blank")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[ToolSpec]) -> list[ToolSpec]:
        names = [tool.name for tool in tools]
        problems = [((*p, "name"), m) for p, m in unique_problems(names, "tool name")]
        if problems:
            raise SpecValueError(problems)
        return tools

    @property
    def code_tools(self) -> list[str]:
        """The ``python:module:function`` tools: code this spec would run with the model's
        arguments (only with the user's opt-in, ``TOOLWIRE_ALLOW_PYTHON_TOOLS=1``)."""
        return [t.implementation for t in self.tools if t.implementation.startswith("python:")]

    @model_validator(mode="after")
    def _librarian_needs_taxonomy(self) -> Spec:
        if self.transport == "xml_attrless" and self.taxonomy is None:
            raise SpecValueError([(("taxonomy",), "required for transport xml_attrless")])
        return self


@dataclass(frozen=True, slots=True)
class LoadedSpec:
    """A validated spec plus where it came from: text and hash go to the store."""

    spec: Spec
    path: Path | None
    text: str
    hash: str
    pack_dir: Path
    base_dir: Path

    def resolve(self, relative: str | Path) -> Path:
        """A path written in the spec, resolved against the spec file's directory."""
        return (self.base_dir / relative).resolve()

    @property
    def replay_path(self) -> Path | None:
        """The cassette file of a ``replay:PATH`` model, else None."""
        model = self.spec.model
        return self.resolve(model.target) if model.provider == "replay" else None


def canonical_json(spec: Spec) -> str:
    """The hashed form: validated values with defaults, sorted keys, no whitespace."""
    data = spec.model_dump(mode="json", by_alias=True)
    if not data.get("checks"):
        # Added after specs were first hashed: a spec without checks keeps its old hash.
        data.pop("checks", None)
    for check in data.get("checks") or ():
        # Kinds of check added later (issue 46): an older check keeps its hash.
        for key in ("file", "contains", "answer_matches", "answer_schema"):
            if check.get(key) is None:
                check.pop(key, None)
    if data.get("memory") == MemorySpec().model_dump(mode="json"):
        data.pop("memory", None)  # likewise for the default memory settings
    if data["constraints"].get("max_changes") == DEFAULT_MAX_CHANGES:
        data["constraints"].pop("max_changes")  # added later: the default keeps the hash
    default_notes = NotesSpec().model_dump(mode="json")
    notes = data.get("notes") or {}
    if notes.get("conventions") == default_notes.pop("conventions"):
        notes.pop("conventions", None)  # added later too: detected conventions keep the hash
    if notes == default_notes:
        data.pop("notes", None)  # and for the default note globs
    if data.get("reorganize") is None:
        data.pop("reorganize", None)  # and for specs that reorganize nothing
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_hash(spec: Spec) -> str:
    """sha256 hex of :func:`canonical_json`; layout- and comment-independent."""
    return sha256(canonical_json(spec).encode("utf-8")).hexdigest()


def load_spec_text(text: str, file: str = "<string>", base_dir: Path | None = None) -> LoadedSpec:
    """Validate YAML text; relative paths resolve against ``base_dir`` (default: cwd).

    Raises SpecError listing every problem found, each located at file:line:column.
    """
    data, index = read_yaml(text, file)
    if not isinstance(data, dict):
        raise SpecError([index.issue((), "a spec is a YAML mapping of keys to values")])
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(issues_from_validation(exc, index, Spec)) from None
    base = (base_dir if base_dir is not None else Path.cwd()).resolve()
    if spec.model.provider == "replay":
        problem = replay_file_problem(base / spec.model.target)
        if problem:
            raise SpecError([index.issue(("model", "name"), problem)])
    return LoadedSpec(
        spec=spec,
        path=None,
        text=text,
        hash=spec_hash(spec),
        pack_dir=pack_dir_of(base, spec.prompt_pack),
        base_dir=base,
    )


def load_spec(path: str | Path) -> LoadedSpec:
    """Read and validate a spec file (UTF-8); raises SpecError, also for unreadable files."""
    path = Path(path)
    try:
        with path.open("rb") as handle:  # bounded: `spec check /dev/zero` ran out of memory
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError([SpecIssue(str(path), None, None, "", exc.strerror or str(exc))]) from None
    if len(raw) > MAX_SPEC_BYTES:
        message = f"larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB: not a spec"
        raise SpecError([SpecIssue(str(path), None, None, "", message)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 (byte {exc.start})"
        raise SpecError([SpecIssue(str(path), None, None, "", message)]) from None
    loaded = load_spec_text(text, file=str(path), base_dir=path.parent)
    return LoadedSpec(
        spec=loaded.spec,
        path=path,
        text=text,
        hash=loaded.hash,
        pack_dir=loaded.pack_dir,
        base_dir=loaded.base_dir,
    )


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of a spec file, for editors (``specs/spec.schema.json``)."""
    schema = Spec.model_json_schema(by_alias=True)
    # The `model` shorthand string is normalised by a before-validator pydantic cannot see.
    schema["properties"]["model"] = {
        "anyOf": [
            {"type": "string", "pattern": f"^({'|'.join(PROVIDERS)}):.+$"},
            {"$ref": "#/$defs/ModelConfig"},
        ],
        "title": "Model",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "toolwire agent spec",
        **{k: v for k, v in schema.items() if k != "title"},
    }


class _Missing:
    """Marks a key absent on one side of a diff (None is a real value)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def _diff(old: Any, new: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            sub = f"{path}.{key}" if path else key
            _diff(old.get(key, MISSING), new.get(key, MISSING), sub, out)
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            a = old[i] if i < len(old) else MISSING
            b = new[i] if i < len(new) else MISSING
            _diff(a, b, f"{path}[{i}]", out)
    elif old is MISSING and new is MISSING:
        return
    elif old != new or type(old) is not type(new):
        out.append((path, old, new))


def diff_specs(old: LoadedSpec, new: LoadedSpec) -> list[tuple[str, Any, Any]]:
    """(key path, old, new) for every leaf that differs; MISSING marks added/removed."""
    out: list[tuple[str, Any, Any]] = []
    _diff(json.loads(canonical_json(old.spec)), json.loads(canonical_json(new.spec)), "", out)
    return out
