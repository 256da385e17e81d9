"""Operation validation (every code, data-driven) and the exact bytes of every change kind."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.domain import OPERATION_KINDS, LibrarianResponse, Operation
from toolwire.librarian.notes.changes import ChangeRejected, render_change, render_changes
from toolwire.librarian.notes.workspace import Workspace, sha256_hex
from toolwire.librarian.validate import validate_operations
from toolwire.spec.model import Constraints as SpecConstraints
from toolwire.spec.model import NoteConventions, NotesSpec

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "workspace"
NOTES = Path(__file__).resolve().parents[2] / "data" / "notes"
TOPICS = ("databases", "networking", "security", "observability") + (
    "cooking", "travel", "finance", "reading",
)  # fmt: skip
CASES = json.loads((DATA / "validate_cases.json").read_text("utf-8"))
CHANGE_CASES = json.loads((DATA / "changes" / "cases.json").read_text("utf-8"))

# These tests pin how edits are made in a vault that keeps toolwire's own ways (a
# ``title:`` and a ``topic:`` property, flow lists), stated as a spec states them;
# the conventions read from a vault are pinned in test_conventions.py.
TOOLWIRE_STYLE = NotesSpec(
    conventions=NoteConventions(title="property", topic_property=True, list_style="flow")
)


def Constraints(**values: Any) -> SpecConstraints:
    """The spec's Constraints with this file's defaults: 10 operations, confidence 0.5."""
    return SpecConstraints(**({"max_operations": 10, "min_confidence": 0.5} | values))


def make_op(i: int, spec: dict[str, Any]) -> Operation:
    return Operation(
        operation_id=f"op_{i + 1}",
        kind=spec["kind"],
        target_note_id=spec.get("target_note_id"),
        target_path=spec.get("target_path"),
        title=spec.get("title", ""),
        body_markdown=spec.get("body_markdown", "-"),
        reason=spec.get("reason", "because"),
        confidence=spec.get("confidence", 0.9),
    )


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    shutil.copytree(DATA / "ws", root)
    return Workspace.load(root, TOOLWIRE_STYLE)


def response_of(ops: list[Operation]) -> LibrarianResponse:
    return LibrarianResponse("req_1", "ok", "summary", tuple(ops), ())


# ---------------------------------------------------------------- validation table


def test_every_code_is_covered() -> None:
    codes = {code.split(":")[0] for c in CASES for _, code in c["expect"] if code}
    assert codes >= {
        "MAX_OPERATIONS_EXCEEDED", "STRICT_FALLBACK_KIND", "KIND_NOT_ALLOWED", "TARGET_NOT_FOUND",
        "TARGET_EXISTS", "PATH_OUTSIDE_WORKSPACE", "PATH_COLLISION", "INVALID_PATH",
        "UNKNOWN_TOPIC", "EMPTY_TOPICS", "RELINK_CHANGES_TEXT", "EMPTY_REWRITE", "INVALID_TITLE",
        "LOW_CONFIDENCE", "DEFERRED_BY_MODEL", "INVALID_FRONT_MATTER", "EMPTY_BODY",
    }  # fmt: skip


def test_a_defer_says_who_deferred(ws: Workspace) -> None:
    """A templated turn's defers are the scorer's plan (the model only fills slots):
    coded DEFERRED_BY_SCORER, so SQL over operations does not blame the model."""
    op = make_op(0, {"kind": "defer", "target_note_id": "pg"})

    def code(**kw: Any) -> str | None:
        out = validate_operations([op], ws, turn=1, constraints=Constraints(), topics=TOPICS, **kw)
        assert out[0].status == "deferred" and out[0].path
        return out[0].code

    assert code() == "DEFERRED_BY_MODEL"
    assert code(planned_by="scorer") == "DEFERRED_BY_SCORER"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_validation_case(ws: Workspace, case: dict[str, Any]) -> None:
    ops = [make_op(i, spec) for i, spec in enumerate(case["ops"])]
    outcomes = validate_operations(
        response_of(ops),
        ws,
        turn=3,
        constraints=Constraints(**case["constraints"]),
        topics=TOPICS,
        ops_so_far=case["ops_so_far"],
        seq_start=7,
    )
    assert [[o.status, o.code] for o in outcomes] == case["expect"]
    assert [o.operation for o in outcomes] == ops
    assert [o.seq for o in outcomes] == list(range(7, 7 + len(ops)))
    assert all(o.turn == 3 for o in outcomes)
    for o in outcomes:
        if o.status == "rejected":
            assert o.detail and o.path is None and o.after_sha256 is None
        if o.status == "planned" or o.code == "LOW_CONFIDENCE":
            assert o.path and o.after_sha256
            assert (o.before_sha256 is None) == (o.operation.kind == "create_note")


def test_planned_hashes_match_the_disk_and_render_changes(ws: Workspace) -> None:
    ops = [
        make_op(0, {"kind": "retitle_note", "target_note_id": "pg", "title": "Postgres tuning"}),
        make_op(
            1,
            {"kind": "retag_note", "target_note_id": "pg", "body_markdown": "databases\nsecurity"},
        ),
        make_op(
            2, {"kind": "retag_note", "target_note_id": "home/bread", "body_markdown": "cooking"}
        ),
        make_op(3, {"kind": "create_note", "target_path": "n/new.md", "body_markdown": "x"}),
    ]
    outcomes = validate_operations(ops, ws, turn=0, constraints=Constraints(), topics=TOPICS)
    assert [o.status for o in outcomes] == ["planned"] * 4
    first, second = outcomes[0], outcomes[1]
    assert first.before_sha256 == sha256_hex((ws.root / "tech/pg.md").read_bytes())
    assert second.before_sha256 == first.after_sha256  # the second sees the first's result
    changes = render_changes(ws, [o.operation for o in outcomes])
    by_path = {c.path: c for c in changes}
    assert list(by_path) == ["tech/pg.md", "home/bread.md", "n/new.md"]
    assert by_path["tech/pg.md"].old == (ws.root / "tech/pg.md").read_bytes()
    assert by_path["tech/pg.md"].new_sha256 == second.after_sha256
    assert by_path["n/new.md"].old is None
    final = by_path["tech/pg.md"].new.decode()
    assert "title: Postgres tuning" in final and "tags: [databases, security]" in final
    assert "# Postgres tuning\n" in final


def test_render_changes_drops_a_net_no_op(ws: Workspace) -> None:
    ops = [
        make_op(0, {"kind": "retitle_note", "target_note_id": "tech/tls", "title": "Other"}),
        make_op(1, {"kind": "retitle_note", "target_note_id": "tech/tls", "title": "TLS"}),
    ]
    assert render_changes(ws, ops) == []


def test_render_changes_raises_for_a_bad_operation(ws: Workspace) -> None:
    with pytest.raises(ChangeRejected) as err:
        render_changes(ws, [make_op(0, {"kind": "retag_note", "target_note_id": "nope"})])
    assert err.value.code == "TARGET_NOT_FOUND"


def test_prior_outcomes_from_earlier_turns_are_seen(ws: Workspace) -> None:
    create = make_op(0, {"kind": "create_note", "target_path": "n/a.md", "body_markdown": "1"})
    turn0 = validate_operations([create], ws, turn=0, constraints=Constraints(), topics=TOPICS)
    again = make_op(0, {"kind": "create_note", "target_path": "N/A.md", "body_markdown": "2"})
    alone = validate_operations([again], ws, turn=1, constraints=Constraints(), topics=TOPICS)
    assert alone[0].status == "planned"  # without prior, turn 1 cannot know
    seen = validate_operations(
        [again], ws, turn=1, constraints=Constraints(), topics=TOPICS, prior=turn0
    )
    assert (seen[0].status, seen[0].code) == ("rejected", "PATH_COLLISION")


def test_validation_writes_nothing(ws: Workspace) -> None:
    before = {p: p.read_bytes() for p in ws.root.rglob("*") if p.is_file()}
    ops = [make_op(i, spec) for c in CASES for i, spec in enumerate(c["ops"])]
    validate_operations(ops, ws, turn=0, constraints=Constraints(max_operations=999), topics=TOPICS)
    assert {p: p.read_bytes() for p in ws.root.rglob("*") if p.is_file()} == before
    assert not (ws.root / "new").exists() and not (ws.root / ".toolwire").exists()


_texts = st.one_of(
    st.sampled_from(["", "-", "cooking", "# Postgres notes\n", "../x.md", "pg", "tech/dns"]),
    st.text(max_size=40),
)
_ops = st.builds(
    Operation,
    operation_id=st.just("op"),
    kind=st.sampled_from([*OPERATION_KINDS, "delete_note", ""]),
    target_note_id=st.one_of(st.none(), _texts),
    target_path=st.one_of(st.none(), _texts, st.sampled_from(["a.md", "/x.md", "tech/DNS.md"])),
    title=_texts,
    body_markdown=_texts,
    reason=st.just("r"),
    confidence=st.floats(allow_nan=True),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_ops, max_size=6))
def test_validation_never_raises(ws: Workspace, ops: list[Operation]) -> None:
    outcomes = validate_operations(ops, ws, turn=0, constraints=Constraints(), topics=TOPICS)
    assert len(outcomes) == len(ops)
    assert all(o.status in ("planned", "rejected", "deferred") for o in outcomes)
    assert all(o.code for o in outcomes if o.status != "planned")


# ---------------------------------------------------------------- change kinds: golden bytes


@pytest.mark.parametrize("case", CHANGE_CASES, ids=[c["name"] for c in CHANGE_CASES])
def test_change_golden(tmp_path: Path, case: dict[str, Any]) -> None:
    base = DATA / "changes"
    if case["input"]:
        target = tmp_path / case["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((base / "input" / case["input"]).read_bytes())
    ws = Workspace.load(tmp_path, TOOLWIRE_STYLE)
    op = make_op(0, case["operation"])
    change = render_change(ws, op)
    assert change is not None
    assert change.path == case["path"]
    assert change.old == (None if not case["input"] else (tmp_path / case["path"]).read_bytes())
    assert change.new == (base / "expected" / f"{case['name']}.md").read_bytes()
    # The result is a well-formed note again: re-read, its title/tags are what the op said.
    reread = ws.with_file(change.path, change.new).note_at(change.path)
    assert reread is not None
    kind = op.kind
    if kind == "retitle_note":
        assert reread.title == op.title.strip()
    if kind == "retag_note":
        assert reread.topic == reread.front_matter["tags"][0]


def test_defer_renders_no_change(ws: Workspace) -> None:
    assert render_change(ws, make_op(0, {"kind": "defer", "target_note_id": "pg"})) is None


@pytest.mark.parametrize("kind", ["retag_note", "retitle_note"])
def test_metadata_changes_keep_every_sample_body_byte_identical(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "notes"
    shutil.copytree(NOTES, root)
    ws = Workspace.load(root, TOOLWIRE_STYLE)
    for note in ws.notes.values():
        spec = {"kind": kind, "target_note_id": note.note_id, "body_markdown": "reading\ntravel"}
        spec["title"] = "A new title"
        change = render_change(ws, make_op(0, spec))
        assert change is not None
        text = change.new.decode("utf-8")
        old_body = note.body
        if kind == "retitle_note" and note.title:
            old_body = old_body.replace(f"# {note.title}", "# A new title", 1)
        assert text.endswith(old_body), note.path
        # only the front matter block changed, in the file's own line-ending style
        head = text[: len(text) - len(old_body)]
        assert head.lstrip("\ufeff").startswith("---")
        if b"\r\n" in note.raw:
            assert "\r\n" in head and "\n" not in head.replace("\r\n", "")


def test_relink_with_the_same_body_keeps_every_sample_note_byte_identical(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    shutil.copytree(NOTES, root)
    ws = Workspace.load(root, TOOLWIRE_STYLE)
    for note in ws.notes.values():
        body = note.body.replace("\r\n", "\n")
        op = make_op(
            0, {"kind": "relink_note", "target_note_id": note.note_id, "body_markdown": body}
        )
        change = render_change(ws, op)
        assert change is not None
        assert change.new == change.old, note.path  # same links, same text: same bytes


def test_change_uses_replace_of_operation_target(ws: Workspace) -> None:
    op = make_op(
        0, {"kind": "retag_note", "target_note_id": "home/bread", "body_markdown": "cooking"}
    )
    by_path = replace(op, target_note_id=None, target_path="home/bread.md")
    assert render_change(ws, op) == render_change(ws, by_path)
