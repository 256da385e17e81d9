"""Incremental runs (issue 29), as real runs: the shipped spec's judgement with the
bundled embedder on a small vault, a real store, and a model that cannot answer (an
empty replay script: any model call would fail the run).

Each change before a run must recompute exactly what it touches, read from the run's
own ``run_costs`` row and from what the embedder was asked:

- nothing changed: nothing embedded, no decision recomputed, no request, no row;
- a note's text edited: that note's text embedded again, that note alone recomputed;
- a note a run filed, edited by the user: its topic becomes an example (confirmed), so
  every note is decided again; only its text is embedded;
- a topic's description changed: only that description embedded, every note decided
  again (the topic's prototype moved);
- a note tagged by the user (an example): nothing embedded, every note decided again;
- the spec changed (a threshold): nothing embedded, every note decided again;
- ``--full``: everything embedded and decided again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from toolwire.embedders import installed
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.judge import scorer as judge
from toolwire.store import Store
from toolwire.store.store import PRUNED

REPO = Path(__file__).resolve().parents[2]
SHIPPED = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text("utf-8"))["judgement"]

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(
        not installed(SHIPPED["embedder"]), reason="needs the bundled embedder (toolwire[local])"
    ),
]

NOTES = {
    "kitchen/dal.md": "---\ntitle: Weeknight dal\ntopic: cooking\n---\n"
    "Red lentils, cumin, turmeric; simmer twenty minutes, temper with mustard seeds.\n",
    "kitchen/bread.md": "---\ntopic: cooking\n---\n"
    "Sourdough bread: feed the starter, autolyse the flour, bake in a hot Dutch oven.\n",
    "net/dns.md": "---\ntitle: DNS checks\ntopic: networking\n---\n"
    "Ask the resolver with dig, compare answers, check TTLs and the search domains.\n",
    "net/vpn.md": "WireGuard tunnel: peers, AllowedIPs, keepalive and routing through the VPN.\n",
    "money/budget.md": "---\ntitle: Monthly budget\ntopic: finance\n---\n"
    "Savings rate, rent, groceries; the budget spreadsheet has one row per month.\n",
    "money/taxes.md": "Tax checklist: receipts, deductions, the return is due in April.\n",
    # Nothing says what this is about: the scorer defers it, and the user tags it.
    "ideas.md": "Random thoughts to sort out later, nothing in particular yet.\n",
}


class Recording:
    """The real embedder, remembering every text it was asked to embed."""

    def __init__(self, inner: judge.Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.passages: list[str] = []
        self.queries: list[str] = []

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        self.passages += texts
        return self.inner.embed_notes(texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        self.queries += texts
        return self.inner.embed_topics(texts)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Recording]]:
    """Every embedder the runs loaded, recording (decisions.load_embedder wraps judge's)."""
    loaded: list[Recording] = []
    real = judge.load_embedder

    def load(name: str) -> Any:
        inner = real(name)
        if inner is None:
            return None
        loaded.append(Recording(inner))
        return loaded[-1]

    monkeypatch.setattr(judge, "load_embedder", load)
    yield loaded


def _spec(tmp: Path, **judgement: Any) -> Path:
    doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    (tmp / "empty.jsonl").write_text("", encoding="utf-8")
    doc["model"]["name"] = f"replay:{tmp / 'empty.jsonl'}"
    doc["prompt_pack"] = str(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small")
    doc.pop("schedule", None)
    # Decisions only: related notes move with any note's text (their own incremental
    # test is tests/local/test_related_notes_runs.py).
    doc.pop("reorganize", None)
    doc["judgement"].update(judgement)
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


class Vault:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "notes"
        for rel, text in NOTES.items():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_text(text, encoding="utf-8")
        self.db = tmp / "store.duckdb"
        self.spec = _spec(tmp)

    def run(self, asked: list[Recording], *, full: bool = False) -> dict[str, Any]:
        before = len(asked)
        ctx = prepare_run(self.spec, workspace=self.root, db=self.db, full=full)
        try:
            result = run_librarian(ctx)
        finally:
            ctx.provider.close()
        assert result.ok, (result.error_code, result.error_message)
        store = Store(self.db)
        cols, rows = store.query("SELECT * FROM run_costs WHERE run_id = ?", [ctx.run_id])
        costs = dict(zip(cols, rows[0], strict=True))
        _, decided = store.query("SELECT note_id, decision, topic, run_id FROM note_evidence")
        decisions = {row[0]: row[1:3] for row in decided}
        written = {row[0] for row in decided if row[3] == ctx.run_id}
        embedder = asked[before] if len(asked) > before else None
        return costs | {
            "turns": result.turns,
            "attempts": len(result.attempts),
            "applied": sum(o.status == "applied" for o in result.outcomes),
            "rows": len(written),
            "written": written,
            "decisions": decisions,
            "passages": embedder.passages if embedder else [],
            "queries": embedder.queries if embedder else [],
        }

    def settle(self, asked: list[Recording]) -> dict[str, Any]:
        """Run until a run changes no note (the first run titles and tags some)."""
        for _ in range(4):
            out = self.run(asked)
            if out["applied"] == 0:
                return out
        raise AssertionError("the vault did not settle in 4 runs")


def test_an_unchanged_rerun_embeds_nothing_asks_nothing_and_stores_no_note_row(
    tmp_path: Path, asked: list[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_KEEP_RAW_RUNS", "1")
    vault = Vault(tmp_path)
    fresh = vault.run(asked)
    assert fresh["texts_embedded"] > len(NOTES) and fresh["embedding_hits"] == 0
    assert fresh["decisions_recomputed"] == len(NOTES) and fresh["notes_to_model"] == 0
    assert fresh["applied"] > 0  # notes get a topic (no title: the vault titles by file name)
    vault.settle(asked)
    same = vault.run(asked)
    assert same["texts_embedded"] == 0 and same["passages"] == same["queries"] == []
    assert (same["decisions_recomputed"], same["decisions_reused"]) == (0, len(NOTES))
    assert (same["turns"], same["attempts"], same["rows"]) == (0, 0, 0)
    # Raw texts are kept for the last ok run only (TOOLWIRE_KEEP_RAW_RUNS=1): the fresh
    # run's answer (the scorer's, written without the model) is pruned, its row kept.
    _, texts = Store(vault.db).query(
        "SELECT a.raw_text FROM attempts a JOIN run_costs c USING (run_id) "
        "WHERE c.decisions_reused = 0 ORDER BY a.started_at LIMIT 1"
    )
    assert texts == [(PRUNED,)]


def test_each_change_recomputes_exactly_what_it_touches(
    tmp_path: Path, asked: list[Recording]
) -> None:
    vault = Vault(tmp_path)
    vault.run(asked)
    before = vault.settle(asked)["decisions"]
    everything = len(NOTES)

    # A note a run filed, then edited by the user: the edit confirms the topic the run
    # wrote (issue 41: only what the user wrote or confirmed is an example), so the
    # examples change and every note is decided again; still only that text is embedded.
    filed = sorted(r for r, text in NOTES.items() if (vault.root / r).read_text("utf-8") != text)
    assert filed, "the runs filed no note"
    note = vault.root / filed[0]
    note.write_text(note.read_text(encoding="utf-8") + "kingfisher\n", encoding="utf-8")
    confirmed = vault.run(asked)
    assert confirmed["passages"] and all("kingfisher" in t for t in confirmed["passages"])
    assert confirmed["queries"] == []
    assert confirmed["decisions_recomputed"] == confirmed["rows"] == everything
    before = confirmed["decisions"]

    # A note's text (a note nobody filed, so no example moves): that note's text alone
    # is embedded again, that note alone decided.
    note = vault.root / "ideas.md"
    assert note.read_text(encoding="utf-8") == NOTES["ideas.md"]  # deferred, untouched
    note.write_text(NOTES["ideas.md"].replace("Random", "Random zebrafinch"), encoding="utf-8")
    edited = vault.run(asked)
    assert edited["passages"] and all("zebrafinch" in t for t in edited["passages"])
    assert edited["queries"] == []
    # That note, and any other whose decision its new text moved (self-training pools
    # the notes the scorer is sure of), nothing else.
    moved = {n for n, d in edited["decisions"].items() if d != before[n]} - {"ideas"}
    assert edited["written"] == {"ideas"} | moved
    assert edited["decisions_recomputed"] == edited["rows"] == 1 + len(moved)

    # A topic's description: that text alone is embedded; every note is decided again.
    doc = yaml.safe_load(vault.spec.read_text(encoding="utf-8"))
    doc["taxonomy"]["descriptions"]["travel"] = "journeys, trains, flights and hotels"
    vault.spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    described = vault.run(asked)
    assert described["passages"] == []
    assert described["queries"] and all("journeys" in t for t in described["queries"])
    assert described["decisions_recomputed"] == everything

    # A note the user tags becomes an example of its topic: no text changes, every
    # note's prototype may move.
    ideas = vault.root / "ideas.md"
    text = ideas.read_text(encoding="utf-8")
    # Untitled still (the vault titles notes by file name); front matter if it was tagged.
    head, sep, body = (
        text.partition("\n---\n") if text.startswith("---\n") else ("---", "\n---\n", text)
    )
    was = re.search(r"^topic: (\w+)$", head, re.M)
    if was is None:  # deferred: the user gives it a topic
        head += "\ntopic: reading"
    else:  # the user files it elsewhere
        head = head.replace(was.group(1), "travel" if was.group(1) == "reading" else "reading")
    ideas.write_text(head + sep + body, encoding="utf-8")
    tagged = vault.run(asked)
    assert tagged["texts_embedded"] == 0
    assert tagged["decisions_recomputed"] == everything

    # The spec: a threshold changes no text, and every decision.
    doc["constraints"]["min_confidence"] = 0.75
    vault.spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    respec = vault.run(asked)
    assert respec["texts_embedded"] == 0 and respec["decisions_recomputed"] == everything
    settled = vault.settle(asked)
    assert settled["decisions_recomputed"] <= everything

    # --full: everything again, whatever the store kept.
    full = vault.run(asked, full=True)
    assert full["embedding_hits"] == 0 and full["full_pass"]
    assert full["texts_embedded"] == len(set(full["passages"])) + len(set(full["queries"]))
    assert full["decisions_recomputed"] == everything
    assert vault.run(asked)["decisions_recomputed"] == 0


def test_a_run_right_after_an_applied_run_embeds_nothing(
    tmp_path: Path, asked: list[Recording]
) -> None:
    """What toolwire wrote (front matter: a topic, a title from the file name) is not
    text the user changed: the next run reads the same texts (issue 43; which title
    counts as toolwire's is pinned in tests/unit/test_scorer_title.py)."""
    vault = Vault(tmp_path)
    # Untagged and plainly finance: the run writes its topic into new front matter.
    note = vault.root / "money" / "tax-return.md"
    note.write_text(
        "Finance: the tax return. Receipts, deductions and the savings account for the "
        "budget; file the tax return with the finance office in April.\n",
        encoding="utf-8",
    )
    before = {p: p.read_bytes() for p in vault.root.rglob("*.md")}
    fresh = vault.run(asked)
    assert fresh["applied"] > 0
    assert any(p.read_bytes() != raw for p, raw in before.items())
    assert note.read_text(encoding="utf-8").startswith("---\ntopic: finance\n---\n")
    after = vault.run(asked)
    assert after["texts_embedded"] == 0 and after["passages"] == after["queries"] == []
    assert after["embedding_hits"] > 0
