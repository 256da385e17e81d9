"""Hostile paths (issue #8 item 3): nothing escapes the workspace, nothing outside is read.

Every case of ``tests/data/hostile/paths/cases.yaml`` is one operation a model
proposes over a trap workspace (links out, a link to /dev/zero, a fifo, a
device, case and Unicode twins, unwritable names) next to a sentinel folder.
Each is checked three ways: by validation alone (its code), inside one
replayed librarian run that applies what is safe and stores everything, and
through the agents' file tools. After each, the sentinel folder is byte- and
mtime-identical and its marker text is nowhere in the store or the report.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile.tally import Tally
from local.replay_spec import replay_spec
from toolwire.domain import OPERATION_KINDS, LibrarianResponse, Operation
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.journal.write_ahead import undo_run
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.validate import validate_operations
from toolwire.protocols.attrless import render_response
from toolwire.spec.model import Constraints
from toolwire.tools.builtins import BUILTIN_SCHEMAS, BUILTINS
from toolwire.tools.executor import run_call
from toolwire.tools.registry import Tool

REPO = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load((REPO / "tests/data/hostile/paths/cases.yaml").read_text("utf-8"))
LAYOUT = TABLE["workspace"]
MARK = "SENTINEL-7f3a"
LONG = {"{long}": "x" * 300, "{long_utf8}": "\u00e9" * 130}  # 300 and 260 bytes
CASES = [(group, case) for group, items in TABLE["cases"].items() for case in items]


def _case_id(item: tuple[str, dict[str, Any]]) -> str:
    return item[1]["name"].replace(" ", "-")


# ---------------------------------------------------------------- the trap workspace


def _build(tmp: Path) -> tuple[Path, Path, str]:
    """(workspace, sentinel folder, how the device was made)."""
    ws, outside = tmp / "ws", tmp / "outside"
    for base, files in ((ws, LAYOUT["notes"]), (outside, LAYOUT["outside"])):
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_bytes(text.encode("utf-8"))
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text(LAYOUT["git_config"], encoding="utf-8")
    for rel, target in LAYOUT["symlinks"].items():
        os.symlink(target.replace("{outside}", str(outside)), ws / rel)
    for rel in LAYOUT["fifos"]:
        os.mkfifo(ws / rel)
    device = "mknod"
    for rel in LAYOUT["devices"]:
        try:
            os.mknod(ws / rel, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except (OSError, AttributeError):  # no CAP_MKNOD: reach a device through a link
            os.symlink("/dev/null", ws / rel)
            device = "symlink to /dev/null"
    for name in LAYOUT["bad_names"]:
        (ws / name).write_text("# A file with a name toolwire must not use\n", encoding="utf-8")
    return ws.resolve(), outside.resolve(), device


def _snapshot(folder: Path, skip: str | None = None) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``folder`` without following links: kind, bytes/target, mtime."""
    found: dict[str, tuple[Any, ...]] = {}
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != skip]
        for name in dirs + files:
            full = Path(here) / name
            st = os.lstat(full)
            rel = full.relative_to(folder).as_posix()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", full.read_bytes(), st.st_mtime_ns)
            else:
                found[rel] = (stat.S_IFMT(st.st_mode), st.st_mtime_ns)
    return found


def _files(snap: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """Files and links only, without mtimes: what "the same content" means for a folder."""
    return {k: v[:2] for k, v in snap.items() if v[0] in ("file", "link")}


def _path(case: dict[str, Any]) -> str:
    path = case["path"]
    for key, value in LONG.items():
        path = path.replace(key, value)
    return path


def _operation(i: int, case: dict[str, Any]) -> Operation:
    kind = case.get("kind", "create_note")
    create = kind == "create_note"
    return Operation(
        operation_id=f"op_{i}",
        kind=kind,
        target_note_id=None if create else case["target"],
        target_path=_path(case) if create else None,
        title="Hostile title",
        body_markdown="Hostile body." if kind != "retitle_note" else "-",
        reason=case["name"],
        confidence=0.9,
    )


# The spec's own model (validate reads its typed fields; a stand-in would hide a rename).
_Limits = Constraints(max_operations=100, allowed_kinds=list(OPERATION_KINDS))


# ---------------------------------------------------------------- the loader


@pytest.mark.timeout(60)  # a fifo or /dev/zero read would hang or never end
def test_loader_skips_every_trap_without_reading_it(tmp_path: Path, tally: Tally) -> None:
    ws, outside, device = _build(tmp_path)
    before = _snapshot(outside)
    loaded = Workspace.load(ws)
    assert sorted(loaded.notes) == sorted(LAYOUT["expect_notes"])
    for name in LAYOUT["expect_skipped"]:
        assert any(
            w.startswith((f"skipped {name}", f"skipped {name!r}")) for w in loaded.warnings
        ), (name, loaded.warnings)
    assert all(MARK.encode() not in note.raw for note in loaded.notes.values())
    assert _snapshot(outside) == before
    tally.add("paths: loader traps", "inputs tried", len(LAYOUT["expect_skipped"]))
    tally.add("paths: loader traps", "skipped with a warning", len(loaded.warnings))
    tally.note("paths: loader traps", f"device made by {device}")


# ---------------------------------------------------------------- validation, case by case


@pytest.mark.timeout(60)
@pytest.mark.parametrize("item", CASES, ids=_case_id)
def test_validation_gives_the_case_its_code(
    item: tuple[str, dict[str, Any]], tmp_path: Path, tally: Tally
) -> None:
    group, case = item
    ws, outside, _ = _build(tmp_path)
    before = _snapshot(outside)
    (outcome,) = validate_operations(
        [_operation(0, case)], Workspace.load(ws), turn=0, constraints=_Limits, topics=[]
    )
    assert outcome.code == case["code"], outcome.detail
    if case["code"] is None:
        assert outcome.status == "planned"
        assert outcome.path == case["path_out"]
        landing = Path(os.path.realpath(ws / outcome.path))
        assert landing.is_relative_to(ws)
    else:
        assert outcome.status == "rejected" and outcome.detail
    assert _snapshot(outside) == before
    tally.add(f"paths: {group}", "inputs tried")
    if case["code"]:
        tally.add(f"paths: {group}", "rejected with a code")


# ---------------------------------------------------------------- one replayed run applies them


def _spec(tmp: Path, texts: list[str]) -> Path:
    return replay_spec(
        tmp, texts, name="hostile-paths", batch=50, max_operations=100, kinds=OPERATION_KINDS
    )


def _store_text(ctx: Any) -> str:
    """Every value of every table of the store, as one string (to grep for the marker)."""
    _, tables = ctx.store.query(
        "select table_name from information_schema.tables where table_schema = 'main'"
    )
    dump = []
    for (table,) in tables:
        _, rows = ctx.store.query(f'select * from "{table}"')
        dump.append(repr(rows))
    return "\n".join(dump)


@pytest.mark.timeout(180)
def test_replayed_run_applies_only_what_stays_inside_and_undo_restores(
    tmp_path: Path, tally: Tally
) -> None:
    ws, outside, _ = _build(tmp_path)
    wired = [(g, c) for g, c in CASES if c.get("wire", True)]
    ops = tuple(_operation(i, c) for i, (_, c) in enumerate(wired))
    answer = render_response(LibrarianResponse("{{request_id}}", "ok", "hostile", ops, ()))
    outside_before, ws_before = _snapshot(outside), _snapshot(ws, skip=".toolwire")
    ctx = prepare_run(_spec(tmp_path, [answer]), workspace=ws, db=tmp_path / "store.duckdb")
    result = run_librarian(ctx)

    assert result.status == "ok", result.error_message
    got = {o.operation.operation_id: o for o in result.outcomes}
    for i, (_, case) in enumerate(wired):
        outcome = got[f"op_{i}"]
        assert outcome.code == case["code"], (case["name"], outcome.detail)
        assert outcome.status == ("applied" if case["code"] is None else "rejected")
    # Exactly the planned paths changed or appeared; every trap is still what it was.
    landed = {c["path_out"] for _, c in wired if c["code"] is None}
    ws_after = _files(_snapshot(ws, skip=".toolwire"))
    assert {k for k, v in ws_after.items() if v != _files(ws_before).get(k)} == landed
    assert set(_files(ws_before)) <= set(ws_after)  # nothing removed, no trap replaced
    assert _snapshot(outside) == outside_before
    # The store holds one row per operation and never the sentinel text.
    _, rows = ctx.store.query(
        "select operation_id, status, code from operations where run_id = ?", [result.run_id]
    )
    lost = len(ops) - len(rows)
    tally.add("paths: replayed run", "rows lost", lost)
    assert lost == 0
    assert {r[0]: r[2] for r in rows} == {f"op_{i}": c["code"] for i, (_, c) in enumerate(wired)}
    assert MARK not in _store_text(ctx)
    assert result.report_path is not None and MARK not in result.report_path.read_text("utf-8")
    # Undo puts every byte back; the traps were never touched.
    undo_run(ws, result.run_id)
    assert _files(_snapshot(ws, skip=".toolwire")) == _files(ws_before)
    assert _snapshot(outside) == outside_before
    tally.add("paths: replayed run", "inputs tried", len(ops))
    tally.add("paths: replayed run", "rejected with a code", sum(bool(c["code"]) for _, c in wired))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", TABLE["wire_cases"], ids=lambda c: c["name"].replace(" ", "-"))
def test_raw_control_bytes_in_a_path_fail_the_response_and_keep_every_attempt(
    case: dict[str, Any], tmp_path: Path, tally: Tally
) -> None:
    ws, outside, _ = _build(tmp_path)
    op = _operation(0, {"name": case["name"], "path": "PLACEHOLDER.md"})
    answer = render_response(LibrarianResponse("{{request_id}}", "ok", "raw", (op,), ()))
    answer = answer.replace("PLACEHOLDER.md", case["path"])  # unescaped, as a model would
    before, ws_before = _snapshot(outside), _snapshot(ws, skip=".toolwire")
    ctx = prepare_run(_spec(tmp_path, [answer] * 3), workspace=ws, db=tmp_path / "s.duckdb")
    result = run_librarian(ctx)
    assert result.status == "Failed" and result.error_code == case["code"]
    _, rows = ctx.store.query(
        "select raw_text, request_id from attempts where run_id = ? order by attempt",
        [result.run_id],
    )
    lost = 3 - len(rows)
    tally.add("paths: raw control bytes", "rows lost", lost)
    assert lost == 0
    for raw, request_id in rows:  # stored byte for byte, the control byte included
        assert raw == answer.replace("{{request_id}}", request_id)
    assert _snapshot(ws, skip=".toolwire") == ws_before and _snapshot(outside) == before
    tally.add("paths: raw control bytes", "inputs tried")
    tally.add("paths: raw control bytes", "rejected with a code")


# ---------------------------------------------------------------- the agents' file tools


def _tools(ws: Path) -> dict[str, Tool]:
    import functools

    return {
        name: Tool(
            name=name,
            description=name,
            args=BUILTIN_SCHEMAS[name],
            implementation=f"builtin:{name}",
            fn=functools.partial(BUILTINS[name], ws),
            timeout_s=10.0,
        )
        for name in BUILTINS
    }


@pytest.mark.timeout(120)
def test_file_tools_refuse_every_trap_and_show_nothing_from_one(
    tmp_path: Path, tally: Tally
) -> None:
    from toolwire.domain import ToolCall

    ws, outside, _ = _build(tmp_path)
    before, ws_before = _snapshot(outside), _snapshot(ws, skip=".toolwire")
    tools = _tools(ws)
    tried = 0

    def call(tool: str, **args: Any) -> Any:
        nonlocal tried
        tried += 1
        return run_call(tools, ToolCall(id=f"c{tried}", tool=tool, args=args))

    groups = TABLE["tool_cases"]
    for path in groups["read_file"]:
        out = call("read_file", path=path)
        assert out.status == "failure" and out.error.startswith("TOOL_FAILED"), (path, out)
    for path in groups["write_file"]:
        out = call("write_file", path=path, content=f"planted by {path!r}")
        assert out.status == "failure" and out.error.startswith("TOOL_FAILED"), (path, out)
    for path in groups["list_dir"]:
        out = call("list_dir", path=path, recursive=True)
        assert out.status == "failure" and out.error.startswith("TOOL_FAILED"), (path, out)
    listing = call("list_dir", path=".", recursive=True)
    assert listing.status == "success"
    traps = set(LAYOUT["symlinks"]) | set(LAYOUT["fifos"]) | set(LAYOUT["devices"])
    assert not traps & {p.rstrip("/") for p in listing.result.content}
    hits = call("search_text", query=MARK)  # the regression: peek.md -> .git/config
    assert hits.status == "success" and hits.result.content == []
    assert _snapshot(outside) == before and _snapshot(ws, skip=".toolwire") == ws_before
    tally.add("paths: file tools", "inputs tried", tried)
    tally.add("paths: file tools", "rejected with a code", tried - 2)
