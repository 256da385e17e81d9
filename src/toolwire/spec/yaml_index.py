"""YAML reading for specs: data plus a key-path -> file position index.

PyYAML's ``safe_load`` forgets where things were and silently keeps the last of
two duplicate keys. We compose the node graph once, check it (duplicates,
non-string keys, non-JSON scalars, alias bombs), index every key path to its
line/column, then construct the plain data from the same nodes. Validation
errors (pydantic ``loc`` tuples) are then mapped back to ``file:line:column``.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from toolwire.errors import SpecError, SpecIssue

__all__ = [
    "KeyPath",
    "LocationIndex",
    "SpecValueError",
    "format_path",
    "issues_from_validation",
    "read_yaml",
]

KeyPath = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
# A spec is JSON data written in YAML: these resolved scalar tags are all it needs.
_JSON_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null")}
_MERGE_TAG = _TAG + "merge"
# Expanded node budget: aliases make billion-laughs documents cheap to write and
# expensive to validate and hash; real specs are a few hundred nodes.
MAX_EXPANDED_NODES = 100_000
# Longest integer scalar accepted. Python refuses int() of more than 4,300 decimal
# digits (a ValueError out of PyYAML's constructor); spec integers are token
# counts and retry limits, so anything this long is hostile or a typo.
MAX_INT_CHARS = 64


def format_path(path: KeyPath) -> str:
    """Render a key path the way users read it: ``tools[0].args.properties``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True, slots=True)
class _Where:
    key: tuple[int, int] | None  # 1-based (line, column) of the key; None for items/root
    value: tuple[int, int]  # 1-based (line, column) where the value starts


@dataclass(slots=True)
class LocationIndex:
    """Maps key paths of the constructed data to their positions in the YAML text."""

    file: str
    entries: dict[KeyPath, _Where] = field(default_factory=dict)

    def _deepest(self, path: KeyPath) -> tuple[KeyPath, _Where | None]:
        for end in range(len(path), -1, -1):
            where = self.entries.get(path[:end])
            if where is not None:
                return path[:end], where
        return (), None

    def issue(self, path: KeyPath, message: str, *, at: str = "value") -> SpecIssue:
        """Build a located issue; ``at`` is ``key`` (unknown/duplicate key),
        ``parent`` (missing key: point at the owner of the mapping) or ``value``."""
        target = path[:-1] if at == "parent" and path else path
        found, where = self._deepest(target)
        pos: tuple[int, int] | None = None
        if where is not None:
            exact = found == target
            if at in ("key", "parent") and exact and where.key is not None:
                pos = where.key
            else:
                pos = where.value
        line, column = pos if pos else (None, None)
        return SpecIssue(self.file, line, column, format_path(path), message)


def _pos(mark: yaml.Mark) -> tuple[int, int]:
    return mark.line + 1, mark.column + 1


def _offset_to_pos(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _yaml_error_issue(exc: yaml.YAMLError, text: str, file: str) -> SpecIssue:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        message = exc.problem or "invalid YAML"
        if exc.context and message.startswith("but "):
            # Composer errors read as one sentence: "expected a single document … but found …".
            message = f"{exc.context}, {message}"
        elif exc.context:
            # The context mark is often where the real mistake is (an unclosed bracket).
            started = ""
            if exc.context_mark is not None and exc.context_mark is not mark:
                started_line, started_column = _pos(exc.context_mark)
                started = f" started at line {started_line}, column {started_column}"
            message = f"{message} ({exc.context}{started})"
        line, column = _pos(mark) if mark else (None, None)
        return SpecIssue(file, line, column, "", f"YAML syntax: {message}")
    if isinstance(exc, ReaderError):
        line, column = _offset_to_pos(text, exc.position)
        message = f"YAML syntax: {exc.reason} (#x{exc.character:04x})"
        return SpecIssue(file, line, column, "", message)
    return SpecIssue(file, None, None, "", f"YAML syntax: {exc}")


class _RecursiveAlias(ValueError):
    def __init__(self, node: Node) -> None:
        super().__init__("recursive alias")
        self.node = node


def _expanded_size(root: Node) -> int:
    """Node count with aliases expanded; raises _RecursiveAlias on a cycle."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:
            raise _RecursiveAlias(node)
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        # Saturate so a 10^9-node document does not take 10^9 additions to reject.
        memo[key] = min(total, MAX_EXPANDED_NODES + 1)
        return memo[key]

    return size(root)


# YAML 1.1 (PyYAML) reads `017` as octal 15 and `1:30` as base-60 90: a spec means
# neither (JSON has no such numbers), and the value would silently be another.
_LEGACY_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")


def _yaml11_number_surprise(node: ScalarNode) -> str | None:
    """Why a number node reads as something its text does not say, or None."""
    if node.tag not in (_TAG + "int", _TAG + "float"):
        return None
    text = node.value
    if ":" in text:
        kind = "a base-60 number"
    elif node.tag == _TAG + "int" and _LEGACY_OCTAL.match(text):
        kind = "an octal number"
    else:
        return None
    read = yaml.safe_load(text)
    if kind == "an octal number" and read == int(text.replace("_", ""), 10):
        return None  # 00, 07: the same number either way
    return f"YAML reads {text} as {kind} ({read}); write {read}, or quote it for a string"


def _mapping_items(node: MappingNode) -> Iterator[tuple[ScalarNode | Node, Node, bool]]:
    """Explicit pairs first, then pairs merged in with ``<<`` (flag True)."""
    merges: list[Node] = []
    for key, value in node.value:
        if isinstance(key, ScalarNode) and key.tag == _MERGE_TAG:
            merges.append(value)
        else:
            yield key, value, False
    for source in merges:
        sources = source.value if isinstance(source, SequenceNode) else [source]
        for sub in sources:
            if isinstance(sub, MappingNode):
                for key, value, _ in _mapping_items(sub):
                    yield key, value, True


def _check_and_index(root: Node, index: LocationIndex) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    file = index.file

    def bad(node: Node, path: KeyPath, message: str) -> None:
        line, column = _pos(node.start_mark)
        issues.append(SpecIssue(file, line, column, format_path(path), message))

    def walk(node: Node, path: KeyPath, key_pos: tuple[int, int] | None) -> None:
        if path not in index.entries:
            index.entries[path] = _Where(key_pos, _pos(node.start_mark))
        if isinstance(node, ScalarNode):
            if node.tag not in _JSON_SCALAR_TAGS:
                kind = node.tag.removeprefix(_TAG)
                bad(node, path, f"YAML {kind} values are not allowed in a spec; quote it")
            elif node.tag == _TAG + "float" and any(
                s in node.value.lower() for s in ("nan", "inf")
            ):
                bad(node, path, f"{node.value} is not a JSON number")
            elif node.tag == _TAG + "int" and len(node.value) > MAX_INT_CHARS:
                bad(node, path, f"an integer of {len(node.value)} characters is too large")
            elif (reading := _yaml11_number_surprise(node)) is not None:
                bad(node, path, reading)
        elif isinstance(node, SequenceNode):
            for i, child in enumerate(node.value):
                walk(child, (*path, i), None)
        elif isinstance(node, MappingNode):
            first_seen: dict[str, int] = {}
            for key, value, merged in _mapping_items(node):
                if not isinstance(key, ScalarNode) or key.tag != _TAG + "str":
                    shown = key.value if isinstance(key, ScalarNode) else "<complex key>"
                    kind = key.tag.removeprefix(_TAG)
                    # YAML 1.1 reads on/off/yes/no and digits as non-strings.
                    bad(key, path, f"key {shown!r} is read as YAML {kind}; keys must be strings")
                    continue
                name = key.value
                if name in first_seen:
                    if not merged:  # explicit keys may override merged ones
                        bad(key, (*path, name), f"duplicate key (first at line {first_seen[name]})")
                    continue
                first_seen[name] = key.start_mark.line + 1
                walk(value, (*path, name), _pos(key.start_mark))

    walk(root, (), None)
    return issues


def _read(loader: yaml.SafeLoader, text: str, index: LocationIndex) -> Any:
    file = index.file
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_error_issue(exc, text, file)]) from None
    if root is None:
        raise SpecError([SpecIssue(file, 1, 1, "", "the spec is empty")])
    try:
        too_big = _expanded_size(root) > MAX_EXPANDED_NODES
    except _RecursiveAlias as exc:
        line, column = _pos(exc.node.start_mark)
        message = "recursive YAML alias: this anchor is used inside itself"
        raise SpecError([SpecIssue(file, line, column, "", message)]) from None
    if too_big:
        message = f"more than {MAX_EXPANDED_NODES} values once aliases are expanded"
        raise SpecError([SpecIssue(file, None, None, "", message)])
    issues = _check_and_index(root, index)
    if issues:
        raise SpecError(issues)
    try:
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_error_issue(exc, text, file)]) from None
    except (ValueError, OverflowError) as exc:
        # Belt and braces: a scalar the checks above let through but the constructor
        # cannot convert must still come out as a spec error, not a bare exception.
        raise SpecError([SpecIssue(file, None, None, "", f"YAML value: {exc}")]) from None


def read_yaml(text: str, file: str) -> tuple[Any, LocationIndex]:
    """Parse one YAML document into plain data and its location index.

    Raises SpecError listing syntax errors, duplicate or non-string keys and
    scalars that are not JSON (timestamps, binary, sets, NaN).
    """
    index = LocationIndex(file)
    try:
        # The reader checks for control characters right in the constructor.
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise SpecError([_yaml_error_issue(exc, text, file)]) from None
    try:
        data = _read(loader, text, index)
    except RecursionError:
        # PyYAML composes recursively: thousands of nested brackets exhaust the stack.
        raise SpecError([SpecIssue(file, None, None, "", "YAML nesting too deep")]) from None
    finally:
        loader.dispose()
    return data, index


class SpecValueError(ValueError):
    """A validator's complaint about places *inside* the value it checked.

    Pydantic locates a validator's error at the field; ``problems`` carry
    sub-paths (e.g. ``properties.path.type`` inside a tool's args schema) so
    the loader can point at the exact line, and can report several at once.
    """

    def __init__(self, problems: list[tuple[KeyPath, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{format_path(p)}: {m}" if p else m for p, m in problems))


def _model_at(root: type[BaseModel], path: KeyPath) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``path`` (for key suggestions)."""
    current: Any = root
    for part in path:
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if typing.get_origin(current) is list and args else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            fields = {f.alias or n: f for n, f in current.model_fields.items()}
            current = fields[part].annotation if part in fields else None
        else:
            return None
        # Unwrap `X | None` to X.
        if typing.get_origin(current) in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(current) if a is not type(None)]
            current = options[0] if len(options) == 1 else None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _suggest(root: type[BaseModel], loc: KeyPath) -> str:
    model = _model_at(root, loc[:-1])
    if model is None:
        return ""
    known = [f.alias or n for n, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(error: Any) -> str:
    message = str(error["msg"])
    value = error.get("input")
    if isinstance(value, str | int | float | bool) and len(repr(value)) <= 60:
        message += f" (got {value!r})"
    return message


def issues_from_validation(
    exc: ValidationError, index: LocationIndex, root: type[BaseModel]
) -> list[SpecIssue]:
    """One located SpecIssue per pydantic error, sorted by position in the file."""
    issues: list[SpecIssue] = []
    for error in exc.errors(include_url=False):
        loc: KeyPath = tuple(error["loc"])
        kind = error["type"]
        cause = error.get("ctx", {}).get("error")
        if kind == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}{_suggest(root, loc)}"
            issues.append(index.issue(loc, message, at="key"))
        elif kind == "missing":
            issues.append(index.issue(loc, f"missing required key {loc[-1]!r}", at="parent"))
        elif isinstance(cause, SpecValueError):
            issues.extend(index.issue((*loc, *sub), message) for sub, message in cause.problems)
        elif isinstance(cause, ValueError):
            issues.append(index.issue(loc, str(cause)))
        else:
            issues.append(index.issue(loc, _describe(error)))
    return sorted(issues, key=lambda i: (i.line is None, i.line or 0, i.column or 0))
