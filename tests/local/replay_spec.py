"""A librarian spec whose model is the replay provider, answering one scripted envelope:
for tests that need a real run (prepare, apply, store, review) whose model says exactly
what the test wants (the hostile tiers use it too)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from toolwire.domain import LibrarianResponse, Operation
from toolwire.protocols.attrless import render_response

REPO = Path(__file__).resolve().parents[2]
EMPTY_ANSWER = render_response(LibrarianResponse("{{request_id}}", "ok", "-", (), ()))


def retag_answer(note_ids: Iterable[str], topic: str = "databases") -> str:
    """An envelope retagging every note of ``note_ids`` with ``topic``."""
    ops = tuple(
        Operation(f"op_{i}", "retag_note", nid, None, "-", topic, "r", 0.9)
        for i, nid in enumerate(note_ids)
    )
    return render_response(LibrarianResponse("{{request_id}}", "ok", "retag", ops, ()))


def replay_spec(
    tmp: Path,
    answers: str | Sequence[str],
    *,
    name: str,
    batch: int = 10,
    max_operations: int | None = None,
    kinds: Sequence[str] = ("retag_note", "defer"),
) -> Path:
    """``tmp/spec.yaml`` (topics databases and cooking, ``kinds`` of operation, ``batch``
    notes per request and as many operations unless ``max_operations`` says otherwise)
    replaying ``answers``, one per model call, from ``tmp/script.jsonl``."""
    texts = [answers] if isinstance(answers, str) else answers
    lines = "".join(json.dumps({"text": t, "finish_reason": "stop"}) + "\n" for t in texts)
    (tmp / "script.jsonl").write_text(lines, encoding="utf-8")
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: {name}
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking]
constraints:
  batch_size: {batch}
  max_operations: {batch if max_operations is None else max_operations}
  allowed_kinds: [{", ".join(kinds)}]
""",
        encoding="utf-8",
    )
    return spec
