"""The librarian end to end with scripted completions: repair, failure codes, store rows, undo."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from store_probe import other_process_reads

from toolwire.domain import Completion, CompletionRequest
from toolwire.librarian.job import prepare_run, run_librarian

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]

VALID = """<librarian_response>
<request_id>{{request_id}}</request_id>
<status>ok</status>
<summary>Retag the bread note and retitle the untitled one.</summary>
<operations>
<operation>
<operation_id>op_1</operation_id>
<kind>retag_note</kind>
<target_note_id>bread</target_note_id>
<title>Sourdough starter</title>
<body_markdown>cooking</body_markdown>
<reason>The note is about baking bread.</reason>
<confidence>0.9</confidence>
</operation>
<operation>
<operation_id>op_2</operation_id>
<kind>retitle_note</kind>
<target_note_id>misc/vacuum</target_note_id>
<title>Postgres VACUUM basics</title>
<body_markdown>-</body_markdown>
<reason>The note has no title.</reason>
<confidence>0.8</confidence>
</operation>
</operations>
<warnings></warnings>
</librarian_response>"""

MALFORMED = "<librarian_response><status ok='1'>ok</status></librarian_response>"
NO_WARNINGS = VALID.replace("<warnings></warnings>\n", "")

NOTES = {
    "bread.md": "---\ntitle: Sourdough starter\ntags: [databases]\n---\n# Sourdough starter\n\n"
    "Feed the starter twice a day with equal flour and water.\n",
    "misc/vacuum.md": "VACUUM reclaims space held by dead tuples.\n\nRun it after bulk deletes.\n",
}


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _spec(tmp_path: Path, script: list[str]) -> Path:
    (tmp_path / "script.jsonl").write_text(
        "".join(json.dumps({"text": t, "finish_reason": "stop"}) + "\n" for t in script),
        encoding="utf-8",
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: librarian-test
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: 10
  max_operations: 5
  allowed_kinds: [retag_note, retitle_note, defer]
""",
        encoding="utf-8",
    )
    return spec


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.md"))
        if ".toolwire" not in p.parts
    }


def _run(tmp_path: Path, script: list[str], **kwargs):
    ws = _workspace(tmp_path)
    db = tmp_path / "store.duckdb"
    ctx = prepare_run(_spec(tmp_path, script), workspace=ws, db=db, **kwargs)
    return ctx, run_librarian(ctx), ws


def test_malformed_then_valid_ends_ok_after_one_repair(tmp_path: Path) -> None:
    ctx, result, ws = _run(tmp_path, [MALFORMED, VALID])
    assert result.status == "ok"
    assert [a.kind for a in result.attempts] == ["initial", "repair"]
    assert [o.status for o in result.outcomes] == ["applied", "applied"]
    text = (ws / "bread.md").read_text(encoding="utf-8")
    assert "cooking" in text and "databases" not in text
    assert "title: Postgres VACUUM basics" in (ws / "misc/vacuum.md").read_text(encoding="utf-8")
    cols, rows = ctx.store.query(
        "select attempt, kind, parse_ok, error_code, raw_text from attempts "
        "where run_id = ? order by attempt",
        [result.run_id],
    )
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (0, "initial", False, "LIBRARIAN_PROTOCOL_INVALID"),
        (1, "repair", True, None),
    ]
    assert rows[0][4] == MALFORMED
    # The repair prompt holds the errors and the original response (seed 002).
    _, prompts = ctx.store.query(
        "select prompt_json from attempts where run_id = ? and attempt = 1", [result.run_id]
    )
    assert MALFORMED in prompts[0][0]
    _, summary = ctx.store.query(
        "select status, repairs, ops_applied from run_summary where run_id = ?", [result.run_id]
    )
    assert summary == [("ok", 1, 2)]


def test_three_malformed_fail_with_protocol_invalid_and_keep_every_text(tmp_path: Path) -> None:
    ctx, result, ws = _run(tmp_path, [MALFORMED, MALFORMED + " ", MALFORMED + "  "])
    assert result.status == "Failed"
    assert result.error_code == "LIBRARIAN_PROTOCOL_INVALID"
    _, rows = ctx.store.query(
        "select raw_text from attempts where run_id = ? order by attempt", [result.run_id]
    )
    assert [r[0] for r in rows] == [MALFORMED, MALFORMED + " ", MALFORMED + "  "]
    _, run = ctx.store.query(
        "select status, error_code from runs where run_id = ?", [result.run_id]
    )
    assert run == [("Failed", "LIBRARIAN_PROTOCOL_INVALID")]
    assert (ws / "bread.md").read_text(encoding="utf-8") == NOTES["bread.md"]


def test_missing_warnings_thrice_fails_with_parse_failed(tmp_path: Path) -> None:
    ctx, result, _ = _run(tmp_path, [NO_WARNINGS] * 3)
    assert result.status == "Failed"
    assert result.error_code == "LIBRARIAN_PARSE_FAILED"
    _, rows = ctx.store.query(
        "select error_codes from attempts where run_id = ? order by attempt", [result.run_id]
    )
    assert all("MISSING_TAG:warnings" in r[0] for r in rows) and len(rows) == 3


def test_running_out_of_script_fails_with_provider_code_and_keeps_attempts(
    tmp_path: Path,
) -> None:
    ctx, result, _ = _run(tmp_path, [MALFORMED])
    assert result.status == "Failed"
    assert result.error_code == "REPLAY_EXHAUSTED"
    _, rows = ctx.store.query("select count(*) from attempts where run_id = ?", [result.run_id])
    assert rows == [(1,)]


def test_dry_run_writes_nothing_and_plans_a_diff(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    before = _digest(ws)
    ctx = prepare_run(
        _spec(tmp_path, [VALID]), workspace=ws, db=tmp_path / "s.duckdb", dry_run=True
    )
    result = run_librarian(ctx)
    assert result.status == "ok"
    assert _digest(ws) == before
    assert "+tags:" in result.diff or "cooking" in result.diff
    assert {o.status for o in result.outcomes} == {"planned"}


def test_undo_restores_every_note_byte_for_byte(tmp_path: Path) -> None:
    from toolwire.librarian.journal.write_ahead import undo_run

    ws = _workspace(tmp_path)
    before = _digest(ws)
    ctx = prepare_run(_spec(tmp_path, [VALID]), workspace=ws, db=tmp_path / "s.duckdb")
    result = run_librarian(ctx)
    assert result.status == "ok" and _digest(ws) != before
    undo_run(ws, result.run_id)
    assert _digest(ws) == before


@pytest.mark.parametrize("provider", ["openai", "replay"])
def test_the_store_is_free_while_a_model_thinks_and_held_through_a_replay(
    tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model call takes seconds to minutes: `toolwire sql` must not wait for the run.
    A replay answers at once, so a replayed run keeps the file (one open per run)."""
    # An endpoint nobody calls (the answers come from the script below).
    monkeypatch.setenv("TOOLWIRE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    ws = _workspace(tmp_path)
    db = tmp_path / "store.duckdb"
    model = "openai:never-called" if provider == "openai" else None
    ctx = prepare_run(_spec(tmp_path, [VALID]), workspace=ws, db=db, model=model)
    from toolwire.providers.replay import ReplayProvider

    replay = ReplayProvider(tmp_path / "script.jsonl")  # the answers, whatever the provider
    seen: list[subprocess.CompletedProcess[str]] = []

    def thinking(request: CompletionRequest) -> Completion:
        seen.append(other_process_reads(db))
        return replay.complete(request)

    result = run_librarian(ctx, call=thinking)
    assert result.status == "ok", result.error_message
    (during,) = seen
    if provider == "openai":
        assert during.returncode == 0, during.stderr
        assert "1" in during.stdout
    else:
        assert during.returncode != 0 and "STORE_LOCKED" in during.stdout + during.stderr
    after = other_process_reads(db)  # the run let go of the file when it ended
    assert after.returncode == 0, after.stderr
