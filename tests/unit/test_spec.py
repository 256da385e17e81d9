"""Specs: data-driven valid/invalid vectors, hash stability, JSON Schema, diff, CLI."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolwire import domain
from toolwire.cli import spec_cmds
from toolwire.errors import SpecError
from toolwire.promptpack.shipped import SHIPPED_PACKS
from toolwire.spec.model import (
    MISSING,
    LoadedSpec,
    OperationKind,
    Spec,
    Transport,
    canonical_json,
    diff_specs,
    load_spec,
    load_spec_text,
    spec_hash,
    spec_json_schema,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "specs"
VALID = sorted((DATA / "valid").glob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
SHIPPED = [REPO / "specs" / "librarian.yaml", REPO / "specs" / "librarian-replay.yaml"]
LIBRARIAN = SHIPPED[0]

PACK = SHIPPED_PACKS / "librarian-small"


def _ids(path: Path) -> str:
    return path.name


# --- vectors ---------------------------------------------------------------------------


def test_vector_folders_are_populated() -> None:
    assert len(VALID) >= 5 and len(INVALID) >= 20
    for path in INVALID:
        assert path.with_suffix(".expected.json").exists(), path.name


@pytest.mark.parametrize("path", VALID + SHIPPED, ids=_ids)
def test_valid_vector_loads_and_hashes(path: Path) -> None:
    loaded = load_spec(path)
    assert re.fullmatch(r"[0-9a-f]{64}", loaded.hash)
    assert loaded.hash == spec_hash(loaded.spec)
    assert loaded.text == path.read_text(encoding="utf-8")
    assert loaded.path == path
    assert loaded.base_dir == path.parent.resolve()
    # The shipped specs name a pack installed with toolwire (issue 42); others a folder.
    beside = (path.parent / loaded.spec.prompt_pack).resolve()
    assert loaded.pack_dir in (beside, SHIPPED_PACKS / loaded.spec.prompt_pack)
    # The canonical form is itself a valid spec with the same hash (nothing lost).
    again = Spec.model_validate(json.loads(canonical_json(loaded.spec)))
    assert spec_hash(again) == loaded.hash


@pytest.mark.parametrize("path", INVALID, ids=_ids)
def test_invalid_vector_reports_expected_issues(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())["issues"]
    with pytest.raises(SpecError) as info:
        load_spec(path)
    got = info.value.issues
    assert len(got) == len(expected), [str(i) for i in got]
    for issue, want in zip(got, expected, strict=True):
        assert issue.file == str(path)
        assert (issue.line, issue.column, issue.path) == (
            want["line"],
            want["column"],
            want["path"],
        )
        assert want["message"] in issue.message


@pytest.mark.parametrize(
    "path", [p for p in VALID if p.name.endswith(".reformatted.yaml")], ids=_ids
)
def test_reformatted_vector_hashes_like_its_original(path: Path) -> None:
    original = path.with_name(path.name.replace(".reformatted", ""))
    assert original.read_text() != path.read_text()
    assert load_spec(path).hash == load_spec(original).hash


def test_minimal_hash_is_pinned() -> None:
    # The hash is stored with every run: changing canonicalisation or a default must be
    # a deliberate act that updates this value.
    expected = "d97cdf933c3f"  # constraints.min_confidence defaults to 0.8 (issue 47)
    assert load_spec(DATA / "valid" / "minimal.yaml").hash[:12] == expected


# --- hashing ---------------------------------------------------------------------------


def _librarian_data() -> dict[str, typing.Any]:
    data = yaml.safe_load(LIBRARIAN.read_text())
    assert isinstance(data, dict)
    return data


def test_layout_comments_order_and_quoting_keep_the_hash() -> None:
    base = load_spec(LIBRARIAN).hash
    data = _librarian_data()
    flow = yaml.safe_dump(data, default_flow_style=True, sort_keys=True)
    block = "# a comment\n" + yaml.safe_dump(data, sort_keys=False, default_style='"', width=40)
    reordered = yaml.safe_dump(dict(reversed(list(data.items()))), sort_keys=False)
    for text in (flow, block, reordered):
        assert load_spec_text(text, base_dir=LIBRARIAN.parent).hash == base


def test_explicit_defaults_and_model_shorthand_keep_the_hash() -> None:
    short = "name: a\nversion: 1\ntransport: xct\nmodel: openai:m\nprompt_pack: p\n"
    long = (
        "name: a\nversion: '1'\ntransport: xct\nprompt_pack: p\ndescription: ''\n"
        "model: {name: 'openai:m', temperature: 0, constrain: grammar, extra_body: {}}\n"
        "constraints: {allow_delete: false, max_repair_retries: 2}\ntools: []\n"
    )
    assert load_spec_text(short).hash == load_spec_text(long).hash


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        (None, "version", "2"),
        (None, "goal", "Organize the notes by topic."),
        ("model", "temperature", 0.1),
        ("model", "name", "llamacpp:smollm2-360m"),
        ("constraints", "max_operations", 5),
        ("constraints", "allowed_kinds", ["retag_note", "defer"]),
        (
            "taxonomy",
            "topics",
            [
                "reading",
                "databases",
                "cooking",
                "travel",
                "finance",
                "networking",
                "security",
                "observability",
                "misc",
            ],
        ),
        ("taxonomy", "descriptions", {"reading": "books"}),
        ("judgement", "candidates", 4),
        ("schedule", "timezone", "Europe/Paris"),
    ],
)
def test_any_value_change_changes_the_hash(section: str | None, key: str, value: object) -> None:
    data = _librarian_data()
    (data[section] if section else data)[key] = value
    changed = load_spec_text(yaml.safe_dump(data), base_dir=LIBRARIAN.parent)
    assert changed.hash != load_spec(LIBRARIAN).hash


# --- shipped specs ---------------------------------------------------------------------


def test_shipped_librarian_spec_matches_the_brief() -> None:
    assert LIBRARIAN.read_text().splitlines()[0] == (
        "# yaml-language-server: $schema=./spec.schema.json"
    )
    spec = load_spec(LIBRARIAN).spec
    assert (spec.name, spec.version, spec.transport) == ("librarian", "1", "xml_attrless")
    assert spec.model.name == "llamacpp:smollm2-135m"
    assert (spec.model.temperature, spec.model.max_tokens, spec.model.constrain) == (
        0.0,
        256,
        "grammar",
    )
    assert spec.taxonomy is not None
    assert spec.taxonomy.topics == [
        "databases", "networking", "security", "observability",
        "cooking", "travel", "finance", "reading",
    ]  # fmt: skip
    c = spec.constraints
    assert (c.strict_mode, c.max_operations, c.batch_size) == (False, 4, 1)
    assert (c.max_repair_retries, c.min_confidence, c.context_window_tokens) == (2, 0.8, 640)
    assert c.allowed_kinds == ["retag_note", "retitle_note", "defer"]
    assert spec.judgement is not None and spec.judgement.decide == "scorer"
    assert set(spec.taxonomy.descriptions) == set(spec.taxonomy.topics)
    assert spec.schedule is not None
    assert (spec.schedule.cron, spec.schedule.timezone) == ("0 6 * * *", "UTC")
    assert load_spec(LIBRARIAN).resolve(spec.schedule.workspace) == REPO / "data" / "notes"
    assert load_spec(LIBRARIAN).pack_dir == PACK  # by name: shipped in the package


def test_replay_spec_differs_from_librarian_only_in_name_model_and_schedule() -> None:
    live, replay = load_spec(LIBRARIAN), load_spec(SHIPPED[1])
    assert {key for key, _, _ in diff_specs(live, replay)} == {"name", "model.name", "schedule"}
    assert replay.replay_path == REPO / "tests" / "data" / "replay" / "librarian-sample.jsonl"
    assert live.replay_path is None


# --- loading edge cases ----------------------------------------------------------------


def test_missing_file_is_one_spec_issue(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    (issue,) = info.value.issues
    assert issue.file == str(tmp_path / "nope.yaml") and issue.line is None
    assert "No such file" in issue.message


def test_non_utf8_file_is_a_spec_issue(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(path)


def test_deep_nesting_is_a_spec_issue() -> None:
    with pytest.raises(SpecError, match="nesting too deep"):
        load_spec_text("a: " + "[" * 5000 + "]" * 5000)


def test_relative_paths_resolve_against_base_dir(tmp_path: Path) -> None:
    text = "name: r\nversion: 1\ntransport: xct\nmodel: replay:c/r.jsonl\nprompt_pack: ../pk\n"
    loaded = load_spec_text(text, file="x.yaml", base_dir=tmp_path / "specs")
    assert loaded.pack_dir == (tmp_path / "pk").resolve()
    assert loaded.replay_path == (tmp_path / "specs" / "c" / "r.jsonl").resolve()
    assert loaded.path is None


def test_spec_built_in_python_reports_sub_paths() -> None:
    with pytest.raises(ValueError, match=r"properties\.p\.type"):
        Spec.model_validate(
            {
                "name": "x", "version": "1", "transport": "native", "model": "openai:m",
                "prompt_pack": "p",
                "tools": [{
                    "name": "t", "description": "d", "implementation": "builtin:read_file",
                    "args": {"type": "object", "properties": {"p": {"type": "nope"}}},
                }],
            }
        )  # fmt: skip


@pytest.mark.parametrize("zone", ["Europe", "x" * 300, "../", "", "UTC\x00", "europe/paris"])
def test_odd_time_zones_are_spec_issues(zone: str) -> None:
    text = (
        "name: z\nversion: 1\ntransport: xct\nmodel: openai:m\nprompt_pack: p\n"
        f"schedule: {{cron: '0 6 * * *', workspace: w, timezone: {json.dumps(zone)}}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_spec_text(text)
    assert [(i.line, i.path) for i in info.value.issues] == [(6, "schedule.timezone")]
    assert "unknown time zone" in info.value.issues[0].message


def test_literals_match_domain() -> None:
    assert typing.get_args(Transport) == domain.TRANSPORTS
    assert typing.get_args(OperationKind) == domain.OPERATION_KINDS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_loads_or_raises_spec_error(text: str) -> None:
    try:
        loaded = load_spec_text(text)
    except SpecError as exc:
        assert exc.issues
    else:
        assert isinstance(loaded, LoadedSpec)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2000), st.integers(min_value=1, max_value=8))
def test_truncated_or_cut_specs_never_escape_spec_error(start: int, length: int) -> None:
    text = LIBRARIAN.read_text()
    broken = text[:start] + text[start + length :]
    try:
        load_spec_text(broken, base_dir=LIBRARIAN.parent)
    except SpecError as exc:
        assert all(i.file == "<string>" for i in exc.issues)


# --- JSON Schema -----------------------------------------------------------------------


def test_json_schema_is_valid_and_accepts_every_valid_vector() -> None:
    from jsonschema import Draft202012Validator

    schema = spec_json_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    validator = Draft202012Validator(schema)
    for path in VALID + SHIPPED:
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path.name, [e.message for e in errors])
    assert list(validator.iter_errors({"name": "x", "transport": "json"}))


def test_committed_schema_file_is_current() -> None:
    committed = json.loads((REPO / "specs" / "spec.schema.json").read_text())
    # Regenerate with: toolwire spec schema > specs/spec.schema.json
    assert committed == spec_json_schema()


# --- diff ------------------------------------------------------------------------------


def _spec_text(**constraints: object) -> str:
    body = ", ".join(f"{k}: {json.dumps(v)}" for k, v in constraints.items())
    return (
        "name: d\nversion: 1\ntransport: native\nprompt_pack: p\n"
        f"model: {{name: 'openai:m', extra_body: {{a: 1, b: 2}}}}\nconstraints: {{{body}}}\n"
    )


def test_diff_reports_changed_added_and_removed_paths() -> None:
    old = load_spec_text(_spec_text(max_operations=12))
    new_text = _spec_text(max_operations=8, allowed_kinds=["defer", "retag_note"])
    new = load_spec_text(new_text.replace("b: 2", "c: 3"))
    assert diff_specs(old, new) == [
        ("constraints.allowed_kinds[0]", "create_note", "defer"),
        ("constraints.allowed_kinds[1]", "rewrite_note", "retag_note"),
        ("constraints.allowed_kinds[2]", "retitle_note", MISSING),
        ("constraints.allowed_kinds[3]", "relink_note", MISSING),
        ("constraints.allowed_kinds[4]", "retag_note", MISSING),
        ("constraints.allowed_kinds[5]", "defer", MISSING),
        ("constraints.max_operations", 12, 8),
        ("model.extra_body.b", 2, MISSING),
        ("model.extra_body.c", MISSING, 3),
    ]
    assert diff_specs(old, old) == []


# --- CLI -------------------------------------------------------------------------------


@pytest.fixture
def cli() -> typer.Typer:
    # A root of our own: the real root imports command modules owned by others.
    root = typer.Typer()
    root.add_typer(spec_cmds.app, name="spec")
    return root


def test_cli_check_ok_and_invalid(cli: typer.Typer) -> None:
    runner = CliRunner()
    # The vectors name packs that do not exist: check their keys and values only.
    ok = runner.invoke(cli, ["spec", "check", "--schema-only", str(LIBRARIAN), str(VALID[0])])
    assert ok.exit_code == 0
    assert ok.stdout.splitlines() == [
        f"ok  {LIBRARIAN}  {load_spec(LIBRARIAN).hash[:12]}",
        f"ok  {VALID[0]}  {load_spec(VALID[0]).hash[:12]}",
    ]
    bad_path = DATA / "invalid" / "unknown-key.yaml"
    bad = runner.invoke(cli, ["spec", "check", str(LIBRARIAN), str(bad_path)])
    assert bad.exit_code == 1
    assert bad.stdout.startswith("ok  ")
    lines = bad.stderr.splitlines()
    assert len(lines) == 3
    assert lines[0] == (
        f"{bad_path}:6:3: model.temprature: unknown key 'temprature' (did you mean 'temperature'?)"
    )
    assert "Traceback" not in bad.output


def test_cli_check_missing_file_is_one_error_line(cli: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["spec", "check", str(tmp_path / "gone.yaml")])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"{tmp_path / 'gone.yaml'}: No such file or directory"]


def test_cli_hash_and_schema(cli: typer.Typer) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["spec", "hash", str(LIBRARIAN)])
    assert result.exit_code == 0 and result.stdout.strip() == load_spec(LIBRARIAN).hash
    bad = runner.invoke(cli, ["spec", "hash", str(DATA / "invalid" / "empty.yaml")])
    assert bad.exit_code == 1 and bad.stdout == "" and "the spec is empty" in bad.stderr
    schema = runner.invoke(cli, ["spec", "schema"])
    assert schema.exit_code == 0 and json.loads(schema.stdout) == spec_json_schema()


def test_cli_diff(cli: typer.Typer, tmp_path: Path) -> None:
    new = tmp_path / "new.yaml"
    new.write_text(
        LIBRARIAN.read_text()
        .replace("max_operations: 4", "max_operations: 8")
        .replace("prompt_pack: librarian-small", f"prompt_pack: {PACK}")
    )
    result = CliRunner().invoke(cli, ["spec", "diff", str(LIBRARIAN), str(new)])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"old  {LIBRARIAN}  {load_spec(LIBRARIAN).hash}"
    assert lines[1] == f"new  {new}  {load_spec(new).hash}"
    assert lines[2:] == [
        "~ constraints.max_operations: 4 -> 8",
        f'~ prompt_pack: "librarian-small" -> "{PACK}"',
    ]
    same = CliRunner().invoke(cli, ["spec", "diff", str(LIBRARIAN), str(LIBRARIAN)])
    assert same.stdout.splitlines()[2:] == ["no changes"]
