"""The small checks a prompt pack's files go through as ``promptpack.load_pack`` reads
them: JSON objects without duplicate keys or NaN, typed fields, file names that stay
inside the pack. Each failure is one ``PackError`` naming the file (and line, column).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from toolwire.errors import PackError

__all__ = [
    "check_fields",
    "check_file_list",
    "check_relative_name",
    "inside_pack",
    "json_type",
    "line_col",
    "parse_json_object",
    "read_bytes",
    "require_text",
]


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PackError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_json_object(path: Path, data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackError(f"{path}: not UTF-8 (byte offset {exc.start})") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_nan)
    except json.JSONDecodeError as exc:
        raise PackError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # from the hooks below
        raise PackError(f"{path}: invalid JSON: {exc}") from None
    except RecursionError:
        raise PackError(f"{path}: invalid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise PackError(f"{path}: must hold a JSON object, got {json_type(value)}")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_nan(token: str) -> float:
    raise ValueError(f"{token} is not allowed")


def check_fields(
    path: Path, prefix: str, obj: Any, schema: Mapping[str, type | tuple[type, ...]]
) -> None:
    """Exactly the keys of ``schema``, each of its type (bool is not a number here)."""
    if not isinstance(obj, dict):
        raise PackError(f"{path}: {prefix.rstrip('.')} must be an object")
    missing = [key for key in schema if key not in obj]
    if missing:
        raise PackError(f"{path}: missing field {prefix + missing[0]!r}")
    extra = [key for key in obj if key not in schema]
    if extra:
        raise PackError(
            f"{path}: unknown field {prefix + extra[0]!r} (allowed: {', '.join(schema)})"
        )
    for key, kind in schema.items():
        value = obj[key]
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if isinstance(value, float) and not math.isfinite(value):
            ok = False
        if not ok:
            names = kind if isinstance(kind, tuple) else (kind,)
            # JSON has one number type: int-or-float reads as "a number".
            wanted = " or ".join(
                _JSON_TYPE_NAMES[k] for k in names if k is not int or float not in names
            )
            raise PackError(
                f"{path}: field {prefix + key!r} must be {wanted}, got {json_type(value)}"
            )


_JSON_TYPE_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def require_text(path: Path, key: str, value: str) -> None:
    if not value.strip():
        raise PackError(f"{path}: field {key!r} must not be empty")


def check_file_list(path: Path, names: list[Any]) -> list[str]:
    if not names:
        raise PackError(f"{path}: hash_policy.include_files must not be empty")
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise PackError(
                f"{path}: hash_policy.include_files entries must be strings, got {name!r}"
            )
        check_relative_name(path, "hash_policy.include_files", name)
        if name in seen:
            raise PackError(f"{path}: hash_policy.include_files lists {name!r} twice")
        seen.add(name)
    return list(names)


def check_relative_name(path: Path, where: str, name: str) -> None:
    """A pack-relative posix path: no absolute paths, '..', backslashes or NUL."""
    pure = PurePosixPath(name)
    bad = (
        not name
        or "\\" in name
        or "\0" in name
        or pure.is_absolute()
        or ".." in pure.parts
        or name != pure.as_posix()  # "./a", "a//b", trailing "/"
    )
    if bad:
        raise PackError(
            f"{path}: {where} entry {name!r} must be a plain relative path inside the pack "
            "(no '..', no absolute path, '/' separators)"
        )


def inside_pack(root: Path, real_root: Path, manifest_path: Path, name: str) -> Path:
    """The file for ``name``, refusing one a symlink takes out of the pack."""
    path = root / name
    if not path.is_file():
        raise PackError(f"{manifest_path}: file {name!r} listed by the pack is missing ({path})")
    if not path.resolve().is_relative_to(real_root):
        raise PackError(f"{manifest_path}: file {name!r} resolves outside the pack directory")
    return path


def line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1
