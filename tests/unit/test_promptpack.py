"""Prompt packs: loading, validation vectors, the hash rule, rendering, and `toolwire pack`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from toolwire.cli import pack_cmds
from toolwire.errors import PackError, PromptBindingError
from toolwire.promptpack.pack import (
    STAGE_BINDINGS,
    hash_files,
    load_pack,
    pack_hash,
    render_stage,
    render_template,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKS = REPO / "src" / "toolwire" / "prompt_packs"
SHIPPED = {
    "librarian": ("propose", "validate_repair"),
    "librarian-small": ("propose", "validate_repair"),
}
VECTORS = REPO / "tests" / "data" / "packs"
VALID = sorted(p for p in (VECTORS / "valid").iterdir() if p.is_dir())
INVALID = sorted(p for p in (VECTORS / "invalid").iterdir() if p.is_dir())


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PACKS / name, dest)
    return dest


# ---------------------------------------------------------------- shipped packs


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_pack_loads_with_engine_bindings(name: str) -> None:
    pack = load_pack(PACKS / name)
    assert tuple(pack.stages) == SHIPPED[name]
    assert pack.protocol == "xml_attrless"
    include = pack.manifest["hash_policy"]["include_files"]
    assert include[0] == "manifest.json"
    assert "README.md" not in include and (PACKS / name / "README.md").is_file()
    assert list(pack.files) == include == list(pack.file_hashes)
    for stage, bindings in STAGE_BINDINGS.items():
        assert set(pack.stages[stage].input_bindings) == set(bindings)
        assert pack.stages[stage].output_format == "xml_attrless"


def test_the_shipped_pack_declares_only_stages_a_job_runs() -> None:
    """Issue 46: seed 002's ingest and plan stages were shipped and hashed but never run;
    they left the pack (src/toolwire/prompt_packs/librarian/README.md says why)."""
    for name in SHIPPED:
        assert not {"ingest", "plan"} & set(load_pack(PACKS / name).stages)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_hash_is_stable_across_loads(name: str) -> None:
    first, second = load_pack(PACKS / name), load_pack(PACKS / name)
    assert first.pack_hash == second.pack_hash == pack_hash(PACKS / name)
    assert re.fullmatch(r"[0-9a-f]{64}", first.pack_hash)
    assert first.file_hashes == second.file_hashes


def test_shipped_packs_hash_differently() -> None:
    assert pack_hash(PACKS / "librarian") != pack_hash(PACKS / "librarian-small")


@pytest.mark.parametrize("included", ["manifest.json", "propose.json", "validate_repair.json"])
def test_any_byte_change_in_an_included_file_changes_the_hash(
    included: str, tmp_path: Path
) -> None:
    pack_dir = _copy("librarian", tmp_path)
    before = load_pack(pack_dir)
    with (pack_dir / included).open("ab") as fh:
        fh.write(b" ")  # trailing whitespace: still valid JSON, one byte more
    after = load_pack(pack_dir)
    assert after.pack_hash != before.pack_hash
    changed = {n for n in before.file_hashes if before.file_hashes[n] != after.file_hashes[n]}
    assert changed == {included}


def test_one_character_inside_a_prompt_changes_the_hash(tmp_path: Path) -> None:
    pack_dir = _copy("librarian-small", tmp_path)
    before = pack_hash(pack_dir)
    path = pack_dir / "propose.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("No attributes.", "No attributes!", 1), encoding="utf-8")
    assert pack_hash(pack_dir) != before


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_readme_and_unlisted_files_do_not_change_the_hash(name: str, tmp_path: Path) -> None:
    pack_dir = _copy(name, tmp_path)
    before = pack_hash(pack_dir)
    with (pack_dir / "README.md").open("a", encoding="utf-8") as fh:
        fh.write("\nA docs fix.\n")
    (pack_dir / "NOTES.txt").write_text("scratch\n", encoding="utf-8")
    assert pack_hash(pack_dir) == before


def test_small_pack_follows_the_small_model_rules() -> None:
    pack = load_pack(PACKS / "librarian-small")
    for stage in pack.stages.values():
        assert stage.temperature == 0.0 and stage.max_tokens == 256
        # 788 characters measured as 277 SmolLM2 tokens: keep the prompt near 250 tokens.
        assert len(stage.system_prompt) <= 800
        shape = stage.system_prompt[stage.system_prompt.index("\n<librarian_response>\n") :]
        assert _max_tag_depth(shape) == 4  # response > operations > operation > field
        # Example values must fail validation if copied verbatim.
        confidence = re.search(r"<confidence>(.*?)</confidence>", stage.system_prompt)
        assert confidence is not None
        assert not re.fullmatch(r"\d+(\.\d+)?", confidence.group(1))
        topic = re.search(r"<body_markdown>(.*?)</body_markdown>", stage.system_prompt)
        assert topic is not None and topic.group(1) == "TOPIC_FROM_TAXONOMY"
        assert "<operations>" in stage.system_prompt and "<warnings></warnings>" in (
            stage.system_prompt
        )


def test_capable_example_parses_and_small_shape_cannot_be_copied() -> None:
    from toolwire.errors import ProtocolError
    from toolwire.protocols.attrless import parse_request, parse_response

    prompt = load_pack(PACKS / "librarian").stages["propose"].system_prompt
    start = prompt.index("Example request (shortened):\n")
    request = prompt[start : prompt.index("</librarian_request>", start) + 20].split("\n", 1)[1]
    assert parse_request(request).sources[0].body_markdown.count("<=") == 2
    example = parse_response(prompt.split("Example response:\n", 1)[1], strict=True)
    assert [op.kind for op in example.operations] == ["retag_note", "retitle_note"]
    assert example.request_id == "req_example" and example.operations[0].body_markdown == "cooking"

    small = load_pack(PACKS / "librarian-small").stages["propose"].system_prompt
    shape = small[small.index("<librarian_response>\n<request_id>") :]
    with pytest.raises(ProtocolError) as info:
        parse_response(shape)
    assert info.value.details == ["operation[0]:INVALID_KIND", "operation[0]:INVALID_CONFIDENCE"]


def _max_tag_depth(text: str) -> int:
    """Deepest nesting of a well-formed tag sequence (fails on an unbalanced one)."""
    stack: list[str] = []
    deepest = 0
    for closing, name in re.findall(r"<(/?)([a-z_]+)>", text):
        if closing:
            assert stack.pop() == name
        else:
            stack.append(name)
            deepest = max(deepest, len(stack))
    assert not stack
    return deepest


# ---------------------------------------------------------------- vectors


@pytest.mark.parametrize("case", VALID, ids=lambda p: p.name)
def test_valid_vectors_load_with_golden_hashes(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    pack = load_pack(case)
    assert list(pack.stages) == expected["stages"]
    assert pack.file_hashes == expected["file_hashes"]
    assert pack.pack_hash == expected["pack_hash"]
    assert hash_files(pack.files.items()) == expected["pack_hash"]


@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.name)
def test_invalid_vectors_raise_pack_error(case: Path) -> None:
    fragment, code = (case / "expected.txt").read_text(encoding="utf-8").splitlines()
    with pytest.raises(PackError) as info:
        load_pack(case)
    assert fragment in info.value.message
    assert info.value.code == code
    assert isinstance(info.value, PromptBindingError) == (code == "PROMPT_BINDING_ERROR")
    assert str(case) in info.value.message  # names the file, not just the problem


def test_hash_files_follows_the_documented_rule() -> None:
    import hashlib

    files = [("manifest.json", b"{}"), ("a.json", b"")]
    manual = hashlib.sha256()
    for name, data in files:
        manual.update(name.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\n")
    assert hash_files(files) == manual.hexdigest()
    assert hash_files(list(reversed(files))) != manual.hexdigest()  # order is part of the hash


def test_missing_directory_is_a_pack_error(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="prompt pack directory not found"):
        load_pack(tmp_path / "nope")


def test_symlink_out_of_the_pack_is_rejected(tmp_path: Path) -> None:
    pack_dir = tmp_path / "pack"
    shutil.copytree(VECTORS / "valid" / "minimal", pack_dir)
    outside = tmp_path / "outside.json"
    outside.write_bytes((pack_dir / "propose.json").read_bytes())
    (pack_dir / "propose.json").unlink()
    (pack_dir / "propose.json").symlink_to(outside)
    with pytest.raises(PackError, match="'propose.json' resolves outside the pack directory"):
        load_pack(pack_dir)


def test_stage_in_a_subfolder_and_spaced_placeholders_load() -> None:
    pack = load_pack(VECTORS / "valid" / "custom_stage")
    stage = pack.stages["summarise"]
    assert stage.output_format == "json" and stage.required_keys == ("summary", "topics")
    assert stage.temperature == 0.7 and stage.model_profile == "capable"
    assert "shared/glossary.txt" in pack.files


# ---------------------------------------------------------------- rendering


def test_render_template_fills_every_placeholder_form() -> None:
    out = render_template("A={{a}} B={{ b }} A again={{\ta }}", {"a": "1", "b": "2"})
    assert out == "A=1 B=2 A again=1"


def test_render_template_is_one_pass() -> None:
    note = "see {{request_xml}} and {{ other }}"
    assert render_template("<{{request_xml}}>", {"request_xml": note}) == f"<{note}>"


def test_render_template_inserts_regex_escapes_literally() -> None:
    value = r"C:\new \1 \g<0> $&"
    assert render_template("x {{v}} y", {"v": value}) == f"x {value} y"


def test_render_template_leaves_malformed_braces_alone() -> None:
    assert render_template("{{ a-b }} {{a}} {x}", {"a": "1"}) == "{{ a-b }} 1 {x}"


def test_render_template_names_a_missing_binding() -> None:
    with pytest.raises(PromptBindingError, match="no value for binding 'errors'"):
        render_template("{{errors}}\n{{original_response}}", {"original_response": "x"})


def test_render_template_names_an_unused_binding() -> None:
    with pytest.raises(PromptBindingError, match="binding 'goal' was given but the template"):
        render_template("{{a}}", {"a": "1", "goal": "g"})


def test_render_template_rejects_non_string_values() -> None:
    with pytest.raises(PromptBindingError, match="binding 'a' must be a string, got int"):
        render_template("{{a}}", {"a": 1})  # type: ignore[dict-item]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_render_stage_propose_messages(name: str) -> None:
    pack = load_pack(PACKS / name)
    request = (
        "<librarian_request>\n<request_id>r1</request_id>\n{{x}} &lt;op&gt;\n</librarian_request>"
    )
    messages = render_stage(pack, "propose", {"request_xml": request})
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == pack.stages["propose"].system_prompt
    assert request in messages[1]["content"]
    assert "{{" not in messages[1]["content"].replace("{{x}}", "")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_render_stage_repair_holds_errors_and_original(name: str) -> None:
    pack = load_pack(PACKS / name)
    errors = "LIBRARIAN_PARSE_FAILED: missing tag (line 3, column 1)\nMISSING_TAG:warnings"
    original = "<librarian_response>\n<request_id>r1</request_id>\n</librarian_response>"
    bindings = {"errors": errors, "original_response": original}
    user = render_stage(pack, "validate_repair", bindings)[1]["content"]
    assert errors in user and original in user
    assert user.index(errors) < user.index(original)


def test_render_stage_unknown_stage_and_missing_binding() -> None:
    pack = load_pack(PACKS / "librarian-small")
    with pytest.raises(PackError, match="pack has no stage 'plan'"):
        render_stage(pack, "plan", {"goal": "g", "inventory": "i"})
    with pytest.raises(PromptBindingError, match="stage 'propose': no value for binding"):
        render_stage(pack, "propose", {})


# ---------------------------------------------------------------- CLI


def _cli() -> typer.Typer:
    root = typer.Typer()
    root.add_typer(pack_cmds.app, name="pack")
    return root


def test_cli_pack_check_ok() -> None:
    pack_dir = PACKS / "librarian"
    result = CliRunner().invoke(_cli(), ["pack", "check", str(pack_dir)])
    assert result.exit_code == 0, result.output
    first, *rest = result.stdout.splitlines()
    assert first == f"ok {pack_dir} {pack_hash(pack_dir)[:12]}"
    assert [line.split()[0] for line in rest] == list(SHIPPED["librarian"])


def test_cli_pack_check_invalid_exits_1() -> None:
    case = VECTORS / "invalid" / "algorithm_md5"
    result = CliRunner().invoke(_cli(), ["pack", "check", str(case)])
    assert result.exit_code == 1
    assert "PACK_INVALID" in result.stderr and "hash_policy.algorithm" in result.stderr
    assert result.stdout == ""


def test_cli_pack_hash_with_files() -> None:
    pack_dir = PACKS / "librarian-small"
    pack = load_pack(pack_dir)
    plain = CliRunner().invoke(_cli(), ["pack", "hash", str(pack_dir)])
    assert plain.exit_code == 0 and plain.stdout == pack.pack_hash + "\n"
    detailed = CliRunner().invoke(_cli(), ["pack", "hash", str(pack_dir), "--files"])
    assert detailed.exit_code == 0
    assert detailed.stdout.splitlines() == [pack.pack_hash] + [
        f"{digest}  {name}" for name, digest in pack.file_hashes.items()
    ]
