"""Prompt packs: a manifest plus one JSON file per stage, rendered with ``{{binding}}``s.

Seed 002 keeps prompt text out of code, in JSON files a manifest lists, and
asks for the files to be hashed and the hash recorded per run. The hash rule:

* every file named in ``hash_policy.include_files`` (``manifest.json`` among
  them) is hashed on its exact bytes: ``file_sha256 = sha256(bytes).hexdigest()``;
* the pack hash is ``sha256`` over the concatenation, in ``include_files``
  order, of ``name + "\\0" + file_sha256 + "\\n"`` (UTF-8), as 64 hex digits.

So any byte change in an included file (or a rename, or a reorder of the list)
changes the pack hash, and files left out of ``include_files`` (a README) never
do. Loading validates everything up front so ``toolwire pack check`` catches a
broken pack before a run spends a model call on it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire.errors import PackError, PromptBindingError
from toolwire.promptpack.checks import (
    check_fields,
    check_file_list,
    check_relative_name,
    inside_pack,
    json_type,
    line_col,
    parse_json_object,
    read_bytes,
    require_text,
)

__all__ = [
    "MANIFEST_NAME",
    "STAGE_BINDINGS",
    "PromptPack",
    "Stage",
    "hash_files",
    "load_pack",
    "pack_hash",
    "render_stage",
    "render_template",
]

MANIFEST_NAME = "manifest.json"
# xml_attrless: the librarian (seed 002); agent: tool agents, one stage per transport.
SUPPORTED_PROTOCOLS = ("xml_attrless", "agent")
XML_CONTRACT = "xml_attrless"

# The bindings the engine passes for the stages it calls. A pack that names
# them differently would only fail at render time, mid-run; check at load.
STAGE_BINDINGS: Mapping[str, tuple[str, ...]] = {
    "propose": ("request_xml",),
    "validate_repair": ("errors", "original_response"),
}
# Stages whose answer format is fixed by what reads them (seed 002).
_STAGE_FORMATS = {"propose": "xml", "validate_repair": "xml", "ingest": "json", "plan": "json"}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_STAGE_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
# `{{name}}` with optional inner spaces. Anything else between braces is left alone
# by render_template, and flagged at load time as a likely typo.
_PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\}\}")

_MANIFEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "pack_version": str,
    "protocol": str,
    "stages": dict,
    "hash_policy": dict,
}
_HASH_POLICY_FIELDS: dict[str, type | tuple[type, ...]] = {"algorithm": str, "include_files": list}
_STAGE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "stage": str,
    "model_profile": str,
    "temperature": (int, float),
    "max_tokens": int,
    "system_prompt": str,
    "user_prompt_template": str,
    "input_bindings": list,
    "output_contract": (str, dict),
}
_JSON_CONTRACT_FIELDS: dict[str, type | tuple[type, ...]] = {"format": str, "required_keys": list}


@dataclass(frozen=True)
class Stage:
    """One stage file: the fixed instructions and the template the engine fills."""

    stage: str
    model_profile: str
    temperature: float
    max_tokens: int
    system_prompt: str
    user_prompt_template: str
    input_bindings: tuple[str, ...]
    output_contract: str | dict[str, Any]  # "xml_attrless" or {"format": "json", ...}

    @property
    def output_format(self) -> str:
        """``"xml_attrless"`` or ``"json"``."""
        if isinstance(self.output_contract, str):
            return self.output_contract
        return str(self.output_contract["format"])

    @property
    def required_keys(self) -> tuple[str, ...]:
        """Top-level keys a JSON answer must have (empty for XML stages)."""
        if isinstance(self.output_contract, str):
            return ()
        return tuple(self.output_contract["required_keys"])


@dataclass(frozen=True)
class PromptPack:
    """A loaded, validated pack with its per-file and whole-pack sha256."""

    dir: Path
    manifest: dict[str, Any]
    stages: dict[str, Stage]
    file_hashes: dict[str, str]  # include_files order
    pack_hash: str
    files: dict[str, bytes] = field(repr=False)  # exact bytes, for content-addressed storage
    protocol: str = XML_CONTRACT


# ---------------------------------------------------------------- rendering


def render_template(template: str, bindings: Mapping[str, str]) -> str:
    """Fill ``{{name}}`` placeholders in one pass; values are never rescanned.

    One ``re.sub`` over the template: a note whose text contains ``{{x}}`` is
    inserted as is. Every placeholder needs a value and every value a
    placeholder, so a renamed binding fails loudly instead of sending a prompt
    with a hole in it.
    """
    used = _placeholders(template)
    missing = [name for name in used if name not in bindings]
    if missing:
        raise PromptBindingError(
            f"no value for binding {missing[0]!r} used by the template"
            + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else "")
        )
    unused = [name for name in bindings if name not in used]
    if unused:
        raise PromptBindingError(
            f"binding {unused[0]!r} was given but the template never uses it"
            + (f" (also unused: {', '.join(unused[1:])})" if unused[1:] else "")
        )
    for name, value in bindings.items():
        if not isinstance(value, str):
            raise PromptBindingError(
                f"binding {name!r} must be a string, got {type(value).__name__}"
            )
    return _PLACEHOLDER.sub(lambda m: bindings[m.group(1)], template)


def render_stage(pack: PromptPack, stage: str, bindings: Mapping[str, str]) -> list[dict[str, Any]]:
    """Messages for one stage: the fixed system prompt and the rendered user turn."""
    found = pack.stages.get(stage)
    if found is None:
        known = ", ".join(pack.stages) or "none"
        raise PackError(f"{pack.dir}: pack has no stage {stage!r} (stages: {known})")
    try:
        user = render_template(found.user_prompt_template, bindings)
    except PromptBindingError as exc:
        raise PromptBindingError(f"stage {stage!r}: {exc.message}") from None
    return [
        {"role": "system", "content": found.system_prompt},
        {"role": "user", "content": user},
    ]


def _placeholders(template: str) -> list[str]:
    """Distinct placeholder names in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(template)))


# ---------------------------------------------------------------- hashing


def hash_files(files: Iterable[tuple[str, bytes]]) -> str:
    """The pack hash of ``(name, bytes)`` pairs in include_files order (module doc)."""
    outer = hashlib.sha256()
    for name, data in files:
        digest = hashlib.sha256(data).hexdigest()
        outer.update(f"{name}\0{digest}\n".encode())
    return outer.hexdigest()


def pack_hash(dir: str | Path) -> str:
    """The pack hash of the pack in ``dir``; the pack must load (an invalid pack has none)."""
    return load_pack(dir).pack_hash


# ---------------------------------------------------------------- loading


def load_pack(dir: str | Path) -> PromptPack:
    """Load and validate a pack; every problem is a PackError naming the file."""
    root = Path(dir)
    if not root.is_dir():
        raise PackError(f"{root}: prompt pack directory not found")
    real_root = root.resolve()
    manifest_path = root / MANIFEST_NAME
    if not manifest_path.is_file():
        raise PackError(f"{manifest_path}: missing {MANIFEST_NAME}")

    manifest_bytes = read_bytes(manifest_path)
    manifest = parse_json_object(manifest_path, manifest_bytes)
    check_fields(manifest_path, "", manifest, _MANIFEST_FIELDS)
    require_text(manifest_path, "pack_version", manifest["pack_version"])
    protocol = manifest["protocol"]
    if protocol not in SUPPORTED_PROTOCOLS:
        raise PackError(
            f"{manifest_path}: protocol must be one of {', '.join(SUPPORTED_PROTOCOLS)}, "
            f"got {protocol!r}"
        )

    policy = manifest["hash_policy"]
    check_fields(manifest_path, "hash_policy.", policy, _HASH_POLICY_FIELDS)
    if policy["algorithm"] != "sha256":
        raise PackError(
            f"{manifest_path}: hash_policy.algorithm must be 'sha256', got {policy['algorithm']!r}"
        )
    include = check_file_list(manifest_path, policy["include_files"])
    if MANIFEST_NAME not in include:
        raise PackError(
            f"{manifest_path}: hash_policy.include_files must list {MANIFEST_NAME!r} "
            "so that manifest changes change the pack hash"
        )

    stage_files = manifest["stages"]
    if not stage_files:
        raise PackError(f"{manifest_path}: stages must name at least one stage")
    for name, file_name in stage_files.items():
        if not _STAGE_NAME.match(name):
            raise PackError(f"{manifest_path}: stage name {name!r} must be lower_snake_case")
        if not isinstance(file_name, str):
            raise PackError(
                f"{manifest_path}: stages.{name} must be a file name (string), "
                f"got {json_type(file_name)}"
            )
        check_relative_name(manifest_path, f"stages.{name}", file_name)
        if file_name not in include:
            raise PackError(
                f"{manifest_path}: stage file {file_name!r} (stages.{name}) is not listed in "
                "hash_policy.include_files; every stage file must be hashed"
            )
        if not (root / file_name).is_file():
            raise PackError(f"{manifest_path}: stage file {file_name!r} (stages.{name}) not found")

    files: dict[str, bytes] = {}
    for name in include:
        path = inside_pack(root, real_root, manifest_path, name)
        files[name] = manifest_bytes if name == MANIFEST_NAME else read_bytes(path)

    stages = {
        name: _load_stage(root / file_name, name, files[file_name], protocol)
        for name, file_name in stage_files.items()
    }
    file_hashes = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return PromptPack(
        dir=root,
        manifest=manifest,
        stages=stages,
        file_hashes=file_hashes,
        pack_hash=hash_files(files.items()),
        files=files,
        protocol=protocol,
    )


def _load_stage(path: Path, name: str, data: bytes, protocol: str) -> Stage:
    raw = parse_json_object(path, data)
    check_fields(path, "", raw, _STAGE_FIELDS)
    if raw["stage"] != name:
        raise PackError(
            f"{path}: field 'stage' is {raw['stage']!r} but the manifest lists this file "
            f"as stage {name!r}"
        )
    for key in ("model_profile", "system_prompt", "user_prompt_template"):
        require_text(path, key, raw[key])

    temperature = raw["temperature"]
    if isinstance(temperature, bool) or not 0.0 <= temperature <= 2.0:
        raise PackError(f"{path}: temperature must be a number in [0.0, 2.0], got {temperature!r}")
    max_tokens = raw["max_tokens"]
    if isinstance(max_tokens, bool) or max_tokens < 1:
        raise PackError(f"{path}: max_tokens must be a positive integer, got {max_tokens!r}")

    bindings = raw["input_bindings"]
    for item in bindings:
        if not isinstance(item, str) or not _NAME.match(item):
            raise PackError(
                f"{path}: input_bindings entries must be identifiers like 'request_xml', "
                f"got {item!r}"
            )
    if len(set(bindings)) != len(bindings):
        raise PackError(f"{path}: input_bindings lists a name twice: {bindings!r}")
    expected = STAGE_BINDINGS.get(name)
    if expected is not None and set(bindings) != set(expected):
        raise PackError(
            f"{path}: stage {name!r} must have input_bindings {list(expected)!r} "
            f"(the engine passes exactly these), got {bindings!r}"
        )

    template = raw["user_prompt_template"]
    _check_template(path, template, bindings)
    if "{{" in raw["system_prompt"]:
        raise PackError(
            f"{path}: system_prompt is sent as is and must not contain '{{{{' placeholders; "
            "put bindings in user_prompt_template"
        )

    contract = _check_contract(path, name, raw["output_contract"], protocol)
    return Stage(
        stage=name,
        model_profile=raw["model_profile"],
        temperature=float(temperature),
        max_tokens=max_tokens,
        system_prompt=raw["system_prompt"],
        user_prompt_template=template,
        input_bindings=tuple(bindings),
        output_contract=contract,
    )


def _check_template(path: Path, template: str, bindings: list[str]) -> None:
    used = _placeholders(template)
    for name in used:
        if name not in bindings:
            raise PromptBindingError(
                f"{path}: user_prompt_template uses {{{{{name}}}}} but input_bindings "
                f"does not declare {name!r}"
            )
    for name in bindings:
        if name not in used:
            raise PromptBindingError(
                f"{path}: input_binding {name!r} is never used by user_prompt_template"
            )
    # A `{{` left after removing real placeholders is a typo ({{ a-b }}, {{x}, ...):
    # render_template would send it literally.
    starts = {m.start() for m in _PLACEHOLDER.finditer(template)}
    stray = next((m.start() for m in re.finditer(r"\{\{", template) if m.start() not in starts), -1)
    if stray >= 0:
        line, column = line_col(template, stray)
        raise PackError(
            f"{path}: user_prompt_template has a malformed placeholder at line {line}, "
            f"column {column}; write {{{{name}}}} with name a declared input_binding"
        )


def _check_contract(path: Path, stage: str, contract: Any, protocol: str) -> str | dict[str, Any]:
    """A text contract names the pack's protocol; a JSON one lists its required keys."""
    wanted = _STAGE_FORMATS.get(stage)
    if isinstance(contract, str):
        if contract != protocol:
            raise PackError(
                f"{path}: output_contract must be {protocol!r} or an object "
                f'{{"format": "json", "required_keys": [...]}}, got {contract!r}'
            )
        if wanted == "json":
            raise PackError(f"{path}: stage {stage!r} answers JSON; output_contract must be JSON")
        return contract
    check_fields(path, "output_contract.", contract, _JSON_CONTRACT_FIELDS)
    if contract["format"] != "json":
        raise PackError(
            f"{path}: output_contract.format must be 'json', got {contract['format']!r}"
        )
    if wanted == "xml":
        raise PackError(
            f"{path}: stage {stage!r} answers {XML_CONTRACT}; output_contract must be "
            f"{XML_CONTRACT!r}"
        )
    keys = contract["required_keys"]
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise PackError(
            f"{path}: output_contract.required_keys must be a non-empty list of key names"
        )
    return {"format": "json", "required_keys": list(keys)}
