"""Issue #16, what toolwire accepted and should refuse, or dropped and should say.

Items 2, 5, 11, 18, 22. 2: a relink whose body was the note flattened onto one
line was applied (bodies compared with all whitespace collapsed); 11: a
6,000-word title went to the model whole; 5: a spec tool ``python:os:system``
passed ``spec check`` and ran whatever the model asked; 18: a relink planting an
external link was applied; 22: notes skipped for bad bytes or names vanished
without a word anyone could read later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.domain import Operation
from toolwire.errors import UsageError
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.validate import validate_operations
from toolwire.spec.model import Constraints, ToolSpec
from toolwire.store import Store
from toolwire.tools.registry import build_registry

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 16: policy"


# ---------------------------------------------------------------- item 5


@pytest.mark.timeout(120)
def test_item5_python_tools_need_the_users_opt_in_and_spec_check_says_so(
    tmp_path: Path, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "tw_hostile_tool.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef run(**kw):\n    return 'ran'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TOOLWIRE_ALLOW_PYTHON_TOOLS", raising=False)
    tools = [
        ToolSpec(name="shell", description="d", implementation="python:os:system"),
        ToolSpec(name="mine", description="d", implementation="python:tw_hostile_tool:run"),
    ]
    for tool in tools:
        with pytest.raises(UsageError, match="TOOLWIRE_ALLOW_PYTHON_TOOLS=1"):
            build_registry([tool], workspace=tmp_path)
    assert not marker.exists()  # refused before the module was even imported
    monkeypatch.setenv("TOOLWIRE_ALLOW_PYTHON_TOOLS", "1")
    assert list(build_registry(tools[1:], workspace=tmp_path)) == ["mine"]  # opted in
    assert marker.exists()

    spec = tmp_path / "agent.yaml"
    spec.write_text(
        f"""name: issue16-agent
version: "1"
transport: xct
model: replay:none.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
tools:
  - name: shell
    description: runs a command
    implementation: python:os:system
    args: {{type: object, properties: {{command: {{type: string}}}}}}
""",
        encoding="utf-8",
    )
    (tmp_path / "none.jsonl").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    out = subprocess.run(
        [sys.executable, "-m", "toolwire", "spec", "check", str(spec)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert f"note: {spec}: runs Python code: python:os:system" in out.stderr, out.stderr
    tally.add(AREA, "inputs tried", 3)
    tally.add(AREA, "rejected with a code", 2)


# ---------------------------------------------------------------- item 18


# The spec's own model (validate reads its typed fields; a stand-in would hide a rename).
_Limits = Constraints(max_operations=10)
_Open = Constraints(max_operations=10, allow_external_links=True)


def _relink(body: str) -> Operation:
    return Operation("op", "relink_note", "a", None, "A", body, "r", 0.9)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("link", "code"),
    [
        ("[the docs](https://attacker.example/login)", "RELINK_EXTERNAL_LINK"),
        ("[b](javascript:alert%281%29)", "RELINK_EXTERNAL_LINK"),
        ("[b](file:///etc/passwd)", "RELINK_EXTERNAL_LINK"),
        ("[b](../outside.md)", "RELINK_EXTERNAL_LINK"),
        ("[[no-such-note]]", "RELINK_EXTERNAL_LINK"),
        # Issue 19: what a regex did not see as links (the markdown parser does).
        (" [b][r]\n\n[r]: https://attacker.example/", "RELINK_EXTERNAL_LINK"),
        (" <https://attacker.example/login>", "RELINK_EXTERNAL_LINK"),
        (" [the [real] docs](https://attacker.example/)", "RELINK_EXTERNAL_LINK"),
        (" [b](https://attacker.example/a(1))", "RELINK_EXTERNAL_LINK"),
        (" [b][r]\n\n[r]: b.md", None),
        (' [B](<b.md> "B")', None),  # issue 30 item 10: a title names its target
        ("[B](b.md)", None),
        ("[[b]]", None),
        ("[C](sub/c.md)", None),
        ("[A](#a)", None),
    ],
)
def test_item18_a_relink_adds_links_to_workspace_notes_only(
    link: str, code: str | None, tmp_path: Path, tally: Tally
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nSee the other note.\n")
    (tmp_path / "b.md").write_text("# B\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.md").write_text("# C\n")
    ws = Workspace.load(tmp_path)
    op = _relink(f"# A\n\nSee the other note.{link}\n")  # only a link added, no text
    (got,) = validate_operations([op], ws, turn=0, constraints=_Limits, topics=[])
    assert got.code == code, got.detail
    if code:
        (allowed,) = validate_operations([op], ws, turn=0, constraints=_Open, topics=[])
        # The spec's choice lets the target through; what the link shows ("the docs",
        # "b") is still not its target's name (issue 30 item 10).
        assert allowed.code != "RELINK_EXTERNAL_LINK", allowed.detail
        tally.add(AREA, "rejected with a code")
    tally.add(AREA, "inputs tried")


# ---------------------------------------------------------------- item 22


def _bad_workspace(root: Path) -> Path:
    root.mkdir()
    (root / "good.md").write_text("# Good\n")
    (root / "latin1.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    (root / "new\nline.md").write_text("# N\n")
    (root / "tab\there.md").write_text("# T\n")
    return root


@pytest.mark.timeout(60)
def test_item22_skipped_notes_are_warnings_the_store_keeps(tmp_path: Path, tally: Tally) -> None:
    ws = Workspace.load(_bad_workspace(tmp_path / "notes"))
    assert list(ws.notes) == ["good"]
    assert len(ws.warnings) == 3, ws.warnings
    assert any(w.startswith("skipped latin1.md: not valid UTF-8") for w in ws.warnings)
    store = Store(tmp_path / "s.duckdb")
    store.start_run({"run_id": "r22", "job": "librarian"})
    assert store.record_warnings("r22", ws.warnings) == 3
    assert store.record_warnings("r22", ["and one more"]) == 1
    assert store.run_warnings("r22") == [*ws.warnings, "and one more"]
    _, rows = store.query("SELECT count(*) FROM run_warnings WHERE run_id = 'r22'")
    assert rows == [(4,)]
    tally.add(AREA, "inputs tried", 3)
    tally.add(AREA, "skipped with a warning", 3)


def _small_spec(tmp_path: Path, name: str, replay: str, extra: str = "") -> Path:
    """A librarian spec on the small pack, answered by the replay script ``replay``."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: {name}
version: "1"
transport: xml_attrless
model: {{name: "replay:{replay}", constrain: none}}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy: {{topics: [databases, cooking]}}
{extra}""",
        encoding="utf-8",
    )
    return spec


@pytest.mark.timeout(120)
def test_item22_a_run_stores_and_reports_what_it_skipped(tmp_path: Path) -> None:
    from toolwire.librarian.job import prepare_run, run_librarian

    notes = _bad_workspace(tmp_path / "notes")
    (tmp_path / "s.jsonl").write_text(json.dumps({"text": "x", "finish_reason": "stop"}) + "\n")
    spec = _small_spec(tmp_path, "issue16-warnings", "s.jsonl")
    ctx = prepare_run(spec, workspace=notes, db=tmp_path / "s.duckdb", dry_run=True)
    result = run_librarian(ctx)
    assert len(ctx.store.run_warnings(result.run_id)) == 3
    assert result.report_path is not None and "latin1.md" in result.report_path.read_text()


# ---------------------------------------------------------------- item 2

_STRUCTURED = """# A

See [b](b.md).

```sh
psql -c 'VACUUM;'
psql -c 'ANALYZE;'
```

- one
- two

| k | v |
|---|---|
| a | 1 |
"""


def _flattened(text: str) -> str:
    return " ".join(text.split()) + "\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_flattened(_STRUCTURED), "RELINK_CHANGES_TEXT"),  # everything on one line
        (_STRUCTURED.replace("- one\n- two", "- one - two"), "RELINK_CHANGES_TEXT"),
        (_STRUCTURED.replace("'VACUUM;'\n", "'VACUUM;' "), "RELINK_CHANGES_TEXT"),
        (_STRUCTURED.replace("| a | 1 |", "| a | 1 | | b | 2 |"), "RELINK_CHANGES_TEXT"),
        (_STRUCTURED.replace("[b](b.md)", "[b](sub/c.md)"), None),  # a real relink
    ],
    ids=["flattened", "list-joined", "code-joined", "table-row-added", "relink"],
)
def test_item2_a_relink_that_reflows_the_body_is_refused(
    body: str, code: str | None, tmp_path: Path, tally: Tally
) -> None:
    (tmp_path / "a.md").write_text(_STRUCTURED)
    (tmp_path / "b.md").write_text("# B\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.md").write_text("# C\n")
    ws = Workspace.load(tmp_path)
    (got,) = validate_operations([_relink(body)], ws, turn=0, constraints=_Limits, topics=[])
    assert got.code == code, got.detail
    tally.add(AREA, "inputs tried")
    if code:
        tally.add(AREA, "rejected with a code")


# ---------------------------------------------------------------- item 11


@pytest.mark.timeout(120)
def test_item11_a_6000_word_title_is_cut_before_it_reaches_the_model(tmp_path: Path) -> None:
    from toolwire.librarian.job import build_requests, load_context, load_workspace
    from toolwire.memory.tokens import estimate_tokens

    notes = tmp_path / "notes"
    notes.mkdir()
    title = " ".join(f"word{i}" for i in range(6000))
    (notes / "huge.md").write_text(f"---\ntitle: {title}\n---\n\nA short body.\n")
    (notes / "small.md").write_text("# Small\n\nA note about databases.\n")
    spec = _small_spec(
        tmp_path, "issue16-title", "none.jsonl",
        "constraints: {context_window_tokens: 2048, batch_size: 1}\n",
    )  # fmt: skip
    ctx = load_context(spec, workspace=notes)
    requests = build_requests(ctx, load_workspace(ctx))
    assert len(requests) == 2
    for request in requests:
        sent = "".join(str(m.get("content") or "") for m in request.messages)
        assert estimate_tokens(sent) <= 2048, estimate_tokens(sent)
        assert "word5999" not in sent
