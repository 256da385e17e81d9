"""Fuzz every parser of untrusted text (issue #8, item 1).

The property is the same for each: any input gives a result, or the parser's own
typed error with a non-empty code (``ProtocolError``, ``SpecError``,
``PackError``), never another exception. Parsers that turn an internal bug into
a ``PARSER_ERROR:<Exception>`` detail (so a run can record it) would pass that
test while hiding a crash, so the detail is asserted absent too. Budgets come from
``fuzz_examples`` (40x under ``TOOLWIRE_HOSTILE_SCALE=long``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile.hostile_inputs import DATA, HOSTILE_TOKENS, hostile_bytes, hostile_text, seeds
from hostile.scale import fuzz_examples
from hostile.tally import Tally
from toolwire.domain import Completion
from toolwire.errors import PackError, ProtocolError, SpecError, ToolwireError
from toolwire.promptpack.pack import PromptPack, load_pack, render_stage
from toolwire.protocols.attrless import parse_request, parse_response
from toolwire.protocols.execute import (
    EXECUTE_INVALID,
    execute_parse_to_dict,
    parse_execute,
)
from toolwire.protocols.native import parse_native
from toolwire.protocols.slots import SlotParse, parse_slots, slot_ids
from toolwire.protocols.xct import XCT_INVALID, decision_to_dict, parse_decision
from toolwire.providers.openai_compat import parse_tool_calls
from toolwire.spec.model import LoadedSpec, load_spec_text

REPO = Path(__file__).resolve().parents[2]
ATTRLESS_CODES = {"LIBRARIAN_PROTOCOL_INVALID", "LIBRARIAN_PARSE_FAILED"}
NONCE = "ai-agent-1a2b3c4d"
SLOT_TOOLS = ("read_file", "write_file", "list_dir", "search_text")
EXEC_TOOLS: dict[str, Any] = json.loads((DATA / "execute" / "tools.json").read_text())
XCT_TOOLS: dict[str, Any] = json.loads((DATA / "xct" / "tools.json").read_text())

RESPONSES = seeds("xml_attrless/valid/*.xml", "xml_attrless/invalid/*.xml")
REQUESTS = seeds("xml_attrless/requests/*.xml")
SLOT_DOCS = seeds("xml/valid/*.txt", "xml/invalid/*.txt", "xml-final/*/*.txt")
EXEC_DOCS = seeds("execute/valid/*.txt", "execute/invalid/*.txt")
XCT_DOCS = seeds("xct/valid/*.txt", "xct/invalid/*.txt")

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def fuzz(n: int) -> Any:
    """Hypothesis settings for one target: ``n`` examples in the suite, no deadline
    (timing is not the property), no example database written into the repo."""
    return settings(
        max_examples=fuzz_examples(n),
        deadline=None,
        suppress_health_check=_HEALTH,
        database=None,
    )


def typed(exc: ToolwireError, codes: set[str], tally: Tally, area: str) -> None:
    """The one accepted failure: a typed error with an expected code, hiding no crash."""
    assert exc.code and exc.code in codes, exc
    details = getattr(exc, "details", [])
    assert not any(str(d).startswith("PARSER_ERROR") for d in details), details
    tally.add(area, "rejected with a code")


# ------------------------------------------------------------------ xml_attrless


@fuzz(400)
@given(text=hostile_text(RESPONSES), strict=st.booleans())
def test_parse_response_text(tally: Tally, text: str, strict: bool) -> None:
    area = "fuzz: xml_attrless"
    tally.add(area, "inputs tried")
    try:
        parse_response(text, strict=strict)
    except ProtocolError as exc:
        typed(exc, ATTRLESS_CODES, tally, area)


@fuzz(200)
@given(data=hostile_bytes(RESPONSES))
def test_parse_response_bytes(tally: Tally, data: bytes) -> None:
    area = "fuzz: xml_attrless"
    tally.add(area, "inputs tried")
    try:
        parse_response(data)
    except ProtocolError as exc:
        typed(exc, ATTRLESS_CODES, tally, area)


@fuzz(200)
@given(text=hostile_text(REQUESTS))
def test_parse_request(tally: Tally, text: str) -> None:
    area = "fuzz: xml_attrless request"
    tally.add(area, "inputs tried")
    try:
        parse_request(text)
    except ProtocolError as exc:
        typed(exc, ATTRLESS_CODES, tally, area)


# ------------------------------------------------------------------------- slots


@fuzz(300)
@given(
    text=hostile_text(SLOT_DOCS),
    mode=st.sampled_from(("xml", "xml-final")),
    finish=st.sampled_from(("stop", "length")),
)
def test_slots_never_raise(tally: Tally, text: str, mode: Any, finish: str) -> None:
    """parse_slots is documented never to raise."""
    area = f"fuzz: slots {mode}"
    tally.add(area, "inputs tried")
    kwargs: dict[str, Any] = {
        "nonce": NONCE,
        "allowed_tools": SLOT_TOOLS,
        "slots": slot_ids(NONCE, 1, 4),
        "mode": mode,
    }
    whole = parse_slots(text, finish_reason=finish, **kwargs)
    assert isinstance(whole, SlotParse)
    assert all(tag.code for tag in whole.invalid)
    tally.add(area, "rejected with a code", len(whole.invalid))


# ----------------------------------------------------------------------- execute


@fuzz(300)
@given(text=hostile_text(EXEC_DOCS), finish=st.sampled_from(("stop", "length")))
def test_execute(tally: Tally, text: str, finish: str) -> None:
    area = "fuzz: execute"
    tally.add(area, "inputs tried")
    try:
        parsed = parse_execute(text, tools=EXEC_TOOLS, finish_reason=finish)
    except ProtocolError as exc:
        typed(exc, {EXECUTE_INVALID}, tally, area)
        return
    json.dumps(execute_parse_to_dict(parsed))


@fuzz(150)
@given(data=hostile_bytes(EXEC_DOCS))
def test_execute_bytes(tally: Tally, data: bytes) -> None:
    area = "fuzz: execute"
    tally.add(area, "inputs tried")
    try:
        parse_execute(data, tools=EXEC_TOOLS)
    except ProtocolError as exc:
        typed(exc, {EXECUTE_INVALID}, tally, area)


# --------------------------------------------------------------------------- xct


@fuzz(300)
@given(text=st.one_of(hostile_text(XCT_DOCS), hostile_bytes(XCT_DOCS)), with_tools=st.booleans())
def test_xct_parse_decision(tally: Tally, text: str | bytes, with_tools: bool) -> None:
    area = "fuzz: xct"
    tally.add(area, "inputs tried")
    try:
        decision = parse_decision(text, tools=XCT_TOOLS if with_tools else None)
    except ProtocolError as exc:
        typed(exc, {XCT_INVALID}, tally, area)
        return
    # An accepted decision is plain JSON data: it must serialise strictly.
    json.dumps(decision_to_dict(decision), allow_nan=False)


# ------------------------------------------------------------------------ native

# Deeply nested arguments ("[" * 10,000) are left to the dedicated regression test
# in test_hostile_output.py: the provider's argument decoding raises RecursionError.
_JSON_SEEDS = [
    '{"path": "notes/a.md"}',
    '{"status": "success", "report": "done"}',
    '{"status": "partial", "report": {"items": [1, 2]}}',
    '{"__raw__": "x"}',
    "[1, 2]",
    '"text"',
    "",
]
_NAMES = st.sampled_from(("read_file", "agent__final_report", "", "x" * 300, "\x00", "write_file"))


@st.composite
def _native_call(draw: st.DrawFn) -> SimpleNamespace:
    arguments = draw(st.one_of(st.none(), hostile_text(_JSON_SEEDS)))
    function = SimpleNamespace(name=draw(st.one_of(st.none(), _NAMES)), arguments=arguments)
    return SimpleNamespace(id=draw(st.one_of(st.none(), st.text(max_size=10))), function=function)


@fuzz(300)
@given(
    calls=st.lists(_native_call(), max_size=6),
    text=st.text(max_size=50),
    final_tool=st.booleans(),
)
def test_parse_native(
    tally: Tally, calls: list[SimpleNamespace], text: str, final_tool: bool
) -> None:
    """Provider payload -> ToolCalls -> NativeParse: every call is accounted for once."""
    area = "fuzz: native"
    tally.add(area, "inputs tried")
    completion = Completion(text=text, tool_calls=parse_tool_calls(calls))
    parsed = parse_native(completion, final_tool=final_tool)
    assert all(bad.code for bad in parsed.invalid)
    accounted = len(parsed.calls) + len(parsed.invalid) + (parsed.final is not None)
    assert accounted == len(calls)
    tally.add(area, "tool calls", len(calls))
    tally.add(area, "calls rejected with a code", len(parsed.invalid))


# ---------------------------------------------------------------------- spec YAML

SPEC_TEXT = (REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8")
SPEC_DATA: dict[str, Any] = yaml.safe_load(SPEC_TEXT)
SPEC_SEEDS = [SPEC_TEXT, *seeds("specs/valid/*.yaml")]
YAML_TOKENS: tuple[str, ...] = (
    "&a ",
    "*a",
    "*b",
    "!!python/object/apply:os.system ['echo pwned']",
    "!!python/name:os.system",
    "!!binary aGk=",
    "!!set {a}",
    "!!timestamp 2024-01-01",
    "2024-01-01",
    "<<: *a",
    "? [a, b]\n: 1",
    "~",
    "yes",
    "0x1F",
    "1:20:30",
    "9" * 5000,
    ".nan",
    "-.inf",
    '"\\0"',
    '"\\ud800"',
    "\x00",
    "\t",
    "%YAML 1.1\n",
    "---\n",
    "...\n",
    "|\n",
    "{",
    "[",
    "@",
    "`",
    "\ufeff",
    "\n  ",
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.just("9" * 5000),
    st.just("a\x00b"),
    st.just("../../../etc"),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@st.composite
def _spec_data_mutation(draw: st.DrawFn) -> str:
    """Delete, retype or add a key somewhere in the librarian spec, then dump it."""
    data = json.loads(json.dumps(SPEC_DATA))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = data
        while isinstance(node, dict) and node and draw(st.booleans()):
            child = node[draw(st.sampled_from(sorted(node)))]
            if not isinstance(child, dict):
                break
            node = child
        if not isinstance(node, dict) or not node:
            continue
        key = draw(st.sampled_from(sorted(node)))
        action = draw(st.sampled_from(("delete", "retype", "add")))
        if action == "delete":
            del node[key]
        elif action == "retype":
            node[key] = draw(_VALUES)
        else:
            node[draw(st.text(min_size=1, max_size=8))] = draw(_VALUES)
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


@st.composite
def _spec_text_mutation(draw: st.DrawFn) -> str:
    """Line-level edits: duplicate a line (a duplicate key), or put a YAML token
    (anchor, alias, tag) after a key's colon or at a line start."""
    lines = draw(st.sampled_from(SPEC_SEEDS)).split("\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        action = draw(st.sampled_from(("dup", "after_colon", "start")))
        if action == "dup":
            lines.insert(i, line)
        elif action == "after_colon" and ":" in line:
            at = line.index(":") + 1
            lines[i] = line[:at] + " " + draw(st.sampled_from(YAML_TOKENS)) + line[at:]
        else:
            lines[i] = draw(st.sampled_from(YAML_TOKENS)) + line
    return "\n".join(lines)


@fuzz(250)
@given(
    text=st.one_of(
        _spec_data_mutation(),
        _spec_text_mutation(),
        hostile_text(SPEC_SEEDS, HOSTILE_TOKENS + YAML_TOKENS),
    )
)
def test_spec_yaml(tally: Tally, text: str) -> None:
    area = "fuzz: spec YAML"
    tally.add(area, "inputs tried")
    try:
        loaded = load_spec_text(text, base_dir=REPO / "specs")
    except SpecError as exc:
        assert exc.issues and all(issue.message for issue in exc.issues)
        typed(exc, {"SPEC_INVALID"}, tally, area)
        return
    assert isinstance(loaded, LoadedSpec) and len(loaded.hash) == 64


# Found by this tier: each escaped load_spec_text as a bare ValueError before its fix.
SPEC_REGRESSIONS = {
    # int() refuses more than 4,300 digits (PyYAML's constructor raised it)
    "huge_int": (("max_tokens: 256", "max_tokens: " + "9" * 5000), "too large"),
    # Path.resolve() raises "embedded null byte"
    "nul_in_prompt_pack": (
        ("prompt_pack: librarian-small", 'prompt_pack: "a\\0b"'),
        "NUL",
    ),
    "nul_in_workspace": (("workspace: ../data/notes", 'workspace: "a\\0b"'), "NUL"),
}


@pytest.mark.parametrize("name", sorted(SPEC_REGRESSIONS))
def test_spec_regressions(tally: Tally, name: str) -> None:
    (old, new), message = SPEC_REGRESSIONS[name]
    assert old in SPEC_TEXT
    tally.add("fuzz: spec YAML", "inputs tried")
    with pytest.raises(SpecError) as info:
        load_spec_text(SPEC_TEXT.replace(old, new), base_dir=REPO / "specs")
    assert info.value.issues[0].line is not None  # located, as every spec issue should be
    assert message in str(info.value)
    tally.add("fuzz: spec YAML", "rejected with a code")


# ------------------------------------------------------------------- prompt packs

PACK = REPO / "src" / "toolwire" / "prompt_packs" / "librarian"
PACK_FILES = {p.name: p.read_bytes() for p in sorted(PACK.glob("*.json"))}
_HOSTILE_NAMES = st.sampled_from(
    (
        "../manifest.json",
        "/etc/passwd",
        "evil.json",  # a symlink to /etc/passwd, made in every example's folder
        "sub/../../x.json",
        "manifest.json\x00",
        "",
        ".",
        "propose.json/",
        "C:\\x.json",
        "PROPOSE.JSON",
        "é.json",
    )
)
_STAGE_KEYS = (
    "stage",
    "model_profile",
    "temperature",
    "max_tokens",
    "system_prompt",
    "user_prompt_template",
    "input_bindings",
    "output_contract",
)


@st.composite
def _pack_edit(draw: st.DrawFn) -> dict[str, bytes]:
    """The pack's files with one to three edits: JSON-level (delete, retype, hostile
    file names, bindings, templates) or byte-level (mutated text)."""
    files = dict(PACK_FILES)
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(files)))
        try:
            data = json.loads(files[name])
        except ValueError:
            data = None
        action = draw(st.sampled_from(("json", "json", "names", "text")))
        if action == "text" or not isinstance(data, dict):
            text = files[name].decode("utf-8", "surrogatepass")
            files[name] = draw(hostile_text([text])).encode("utf-8", "surrogatepass")
            continue
        policy, stages = data.get("hash_policy"), data.get("stages")
        if action == "names" and isinstance(policy, dict) and isinstance(stages, dict):
            names = policy.get("include_files")
            if isinstance(names, list):
                names.insert(draw(st.integers(0, len(names))), draw(_HOSTILE_NAMES))
            if stages and draw(st.booleans()):
                stages[draw(st.sampled_from(sorted(stages)))] = draw(_HOSTILE_NAMES)
        elif name != "manifest.json":  # a stage file
            key = draw(st.sampled_from(_STAGE_KEYS))
            choice = draw(st.sampled_from(("delete", "retype", "template", "bindings")))
            if choice == "delete":
                data.pop(key, None)
            elif choice == "retype":
                data[key] = draw(_VALUES)
            elif choice == "template":
                data["user_prompt_template"] = draw(
                    st.sampled_from(("{{", "}}", "{{ request_xml }}", "{{x}}", "{{{{a}}}}"))
                ) + draw(st.text(max_size=20))
            else:
                data["input_bindings"] = draw(
                    st.lists(st.sampled_from(("request_xml", "errors", "x", "", "a b", 1)))
                )
        elif data:
            key = draw(st.sampled_from(sorted(data)))
            if draw(st.booleans()):
                data[key] = draw(_VALUES)
            else:
                del data[key]
        files[name] = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return files


@pytest.fixture(scope="module")
def pack_root() -> Any:
    root = Path(tempfile.mkdtemp(prefix="toolwire-packfuzz-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


_counter = iter(range(10**9))


def _write_pack(root: Path, files: dict[str, bytes]) -> Path:
    folder = root / f"pack{next(_counter)}"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    os.symlink("/etc/passwd", folder / "evil.json")
    return folder


@fuzz(150)
@given(files=_pack_edit())
def test_prompt_pack(tally: Tally, pack_root: Path, files: dict[str, bytes]) -> None:
    area = "fuzz: prompt packs"
    tally.add(area, "inputs tried")
    folder = _write_pack(pack_root, files)
    try:
        pack = load_pack(folder)
        assert isinstance(pack, PromptPack)
        # Nothing outside the pack folder is ever read into a loaded pack.
        assert all(b"root:" not in data for data in pack.files.values())
        for name, stage in pack.stages.items():
            bindings = {b: "<x>{{y}}</x> &amp; \x00" for b in stage.input_bindings}
            render_stage(pack, name, bindings)
    except PackError as exc:
        typed(exc, {"PACK_INVALID", "PROMPT_BINDING_ERROR"}, tally, area)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
