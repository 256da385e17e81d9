"""Hostile note content (issue #8 item 3): nothing a note says is read as structure.

The notes of ``tests/data/hostile/notes/notes.yaml`` carry the protocols' own
tags, forged responses, results blocks, slot nonces, entities, CDATA ends,
NUL and control bytes, BOMs and a 1 MB line. Three proofs:

(a) the librarian request built from them parses back to exactly the notes
    (ids, titles, bodies), none more, none fewer;
(b) a file tool reading one hands it to every agent transport in a block that
    parses back to exactly the note and holds no forged call or slot;
(c) a replayed librarian run over them completes, stores each request, and
    changes only what the replayed answer said.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile.tally import Tally
from local.replay_spec import replay_spec
from toolwire.domain import LibrarianResponse, Operation, ToolCall
from toolwire.librarian.batching import TRUNCATION_MARK
from toolwire.librarian.job import build_requests, load_context, prepare_run, run_librarian
from toolwire.librarian.notes.workspace import Workspace
from toolwire.protocols.attrless import parse_request, render_response
from toolwire.protocols.execute import render_results
from toolwire.protocols.native import tool_message
from toolwire.protocols.slots import render_xml_past, slot_ids
from toolwire.protocols.xct import render_tool_result
from toolwire.tools.builtins import BUILTIN_SCHEMAS, BUILTINS
from toolwire.tools.executor import content_text, run_call
from toolwire.tools.registry import Tool

REPO = Path(__file__).resolve().parents[2]
DATA = yaml.safe_load((REPO / "tests/data/hostile/notes/notes.yaml").read_text("utf-8"))
HUGE = "huge_line.md"
NOTES: dict[str, str] = {
    **DATA["notes"],
    HUGE: "x" * (DATA["huge_line_bytes"] - len("</body_markdown>\n")) + "</body_markdown>\n",
}
# Characters XML 1.0 cannot carry: the request shows them as U+FFFD (the one lossy step).
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _workspace(tmp: Path) -> Path:
    root = tmp / "notes"
    root.mkdir()
    for rel, text in NOTES.items():
        (root / rel).write_bytes(text.encode("utf-8"))
    return root.resolve()


def _spec(tmp: Path, texts: list[str]) -> Path:
    spec = replay_spec(
        tmp,
        texts,
        name="hostile-notes",
        batch=8,
        max_operations=10,
        kinds=("retag_note", "retitle_note", "rewrite_note", "defer"),
    )
    # Titles in headings, as the retitled note keeps its own (issue 42: a vault whose
    # titles are file names refuses a retitle; these notes are too few to say which).
    with spec.open("a", encoding="utf-8") as handle:
        handle.write("notes:\n  conventions:\n    title: h1\n")
    return spec


# ---------------------------------------------------------------- (a) the librarian request


@pytest.mark.timeout(120)
def test_request_parses_back_to_exactly_the_notes(tmp_path: Path, tally: Tally) -> None:
    ws = _workspace(tmp_path)
    loaded = Workspace.load(ws)
    assert loaded.warnings == [] and len(loaded.notes) == len(NOTES)
    ctx = load_context(_spec(tmp_path, []), workspace=ws)
    requests = build_requests(ctx, loaded)
    seen: list[str] = []
    for tr in requests:
        back = parse_request(tr.request_xml)
        assert back.request_id == tr.request_id
        assert [s.source_id for s in back.sources] == list(tr.note_ids)  # none forged
        for source in back.sources:
            note = loaded.notes[source.source_id]
            assert source.title == _XML_ILLEGAL.sub("\ufffd", note.title)
            body = _XML_ILLEGAL.sub("\ufffd", note.body)
            if source.source_id in tr.truncated_ids:  # cut at a line, then marked
                assert source.body_markdown.endswith(TRUNCATION_MARK)
                assert body.startswith(source.body_markdown[: -len(TRUNCATION_MARK)])
            else:
                assert source.body_markdown == body, source.source_id
            seen.append(source.source_id)
    assert sorted(seen) == sorted(loaded.notes)  # none lost
    assert HUGE[:-3] in {i for tr in requests for i in tr.truncated_ids}
    tally.add("notes: librarian request", "inputs tried", len(NOTES))
    tally.add("notes: librarian request", "notes", len(seen))
    tally.add("notes: librarian request", "forged structures", 0)


# ---------------------------------------------------------------- (b) the agent transports


def _read(root: Path, rel: str) -> Any:
    tool = Tool(
        name="read_file",
        description="read",
        args=BUILTIN_SCHEMAS["read_file"],
        implementation="builtin:read_file",
        timeout_s=10.0,
        fn=lambda path: BUILTINS["read_file"](root, path),
    )
    return run_call(
        {"read_file": tool}, ToolCall(id="call_1", tool="read_file", args={"path": rel})
    )


def _results_items(block: str) -> list[Any]:
    """A reader of seed 000's block: the JSON between <results> and the first </results>."""
    start = block.index("<results>") + len("<results>")
    return json.loads(block[start : block.index("</results>", start)])


def _past_entries(text: str, nonce: str) -> list[str]:
    """A reader of XML-PAST: the responses under headers that carry the session nonce."""
    header = re.compile(rf"^## {re.escape(nonce)}-\d{{4}} \S+: \w+ \(\d+ ms\)\n", re.M)
    starts = [m for m in header.finditer(text)]
    out = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() - 2 if i + 1 < len(starts) else len(text) - 1
        entry = text[m.end() : end]
        out.append(entry.split("response:\n", 1)[1])
    return out


SMALL = sorted(n for n in NOTES if n != HUGE)  # read_file's limit is 256 KB


def test_some_notes_try_to_close_the_results_block() -> None:
    assert [n for n in SMALL if "</results>" in NOTES[n]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rel", SMALL)
def test_execute_results_block_carries_the_note_exactly(
    rel: str, tmp_path: Path, tally: Tally
) -> None:
    tally.add("notes: execute results", "inputs tried")
    out = _read(_workspace(tmp_path), rel)
    assert out.status == "success"
    block = render_results([out.result])
    assert block.count("</results>") == 1  # the note cannot close the block early
    items = _results_items(block)
    assert items == [{"tool": "read_file", "status": "success", "content": NOTES[rel]}]


@pytest.mark.timeout(120)
def test_every_other_transport_carries_each_note_exactly(tmp_path: Path, tally: Tally) -> None:
    root = _workspace(tmp_path)
    nonce = f"ai-agent-{secrets.token_hex(4)}"
    for rel in SMALL:
        text = NOTES[rel]
        out = _read(root, rel)
        assert out.status == "success" and out.result.content == text
        # xml: XML-PAST; only headers with the session nonce count, a note cannot know it.
        call = ToolCall("call_1", "read_file", {"path": rel}, "xml", slot_ids(nonce, 1, 1)[0])
        past = render_xml_past([(call, out.result)])
        assert _past_entries(past, nonce) == [text.rstrip("\n")], rel
        assert past.count(nonce) == 1
        # xct: one JSON system response.
        assert json.loads(render_tool_result(out.result)) == {"status": "success", "result": text}
        # native and xml-final: a tool message per call id.
        message = tool_message("call_1", content_text(out.result.content))
        assert json.loads(json.dumps(message))["content"] == text
    tally.add("notes: agent transports", "inputs tried", 3 * len(SMALL))


# ---------------------------------------------------------------- (c) a replayed run over them


def _answer(ops: tuple[Operation, ...]) -> str:
    return render_response(LibrarianResponse("{{request_id}}", "ok", "tidy", ops, ()))


def _op(i: int, kind: str, target: str, title: str, body: str) -> Operation:
    return Operation(f"op_{i}", kind, target, None, title, body, "hostile", 0.9)


@pytest.mark.timeout(180)
def test_replayed_run_changes_only_what_the_answer_said(tmp_path: Path, tally: Tally) -> None:
    ws = _workspace(tmp_path)
    before = {p.name: p.read_bytes() for p in ws.glob("*.md")}
    ctx = load_context(_spec(tmp_path, []), workspace=ws)
    turns = build_requests(ctx, Workspace.load(ws))
    # First turn: retag a note that holds a forged response, retitle one with tags in
    # its heading; every later turn: nothing to do.
    first = _answer(
        (
            _op(1, "retag_note", "fake_response", "Reply", "cooking"),
            _op(2, "retitle_note", "h1_title", "A safe title", "-"),
        )
    )
    script = [first] + [_answer(()) for _ in turns[1:]]
    run = prepare_run(_spec(tmp_path, script), workspace=ws, db=tmp_path / "store.duckdb")
    result = run_librarian(run)
    assert result.status == "ok", result.error_message
    assert [o.status for o in result.outcomes] == ["applied", "applied"]
    after = {p.name: p.read_bytes() for p in ws.glob("*.md")}
    changed = {name for name in before if after[name] != before[name]}
    assert changed == {"fake_response.md", "h1_title.md"} and set(after) == set(before)
    assert b"pwned" not in after["victim.md"] and after["victim.md"] == before["victim.md"]
    # Every request is stored as sent and still parses back to its notes.
    _, rows = run.store.query(
        "select prompt_json, request_id from attempts where run_id = ? order by turn",
        [result.run_id],
    )
    lost = len(turns) - len(rows)
    tally.add("notes: replayed run", "rows lost", lost)
    assert lost == 0
    stored_ids: list[str] = []
    for prompt_json, request_id in rows:
        user = "\n".join(m["content"] for m in json.loads(prompt_json) if m["role"] == "user")
        start = user.index("<librarian_request>")
        end = user.index("</librarian_request>\n", start) + len("</librarian_request>\n")
        request = parse_request(user[start:end])
        assert request.request_id == request_id
        stored_ids += [s.source_id for s in request.sources]
    assert sorted(stored_ids) == sorted(Workspace.load(tmp_path / "notes").notes)
    tally.add("notes: replayed run", "inputs tried", len(NOTES))
