"""Cached embeddings are evicted (issue 29 follow-up): every ``embedding_cache`` row carries
the day it was last used, a run marks the rows it looked up, and after an ok run rows
unused for more than ``TOOLWIRE_KEEP_EMBEDDINGS_DAYS`` days are deleted.

Real librarian runs on a small vault and a real store file, with a deterministic hashing
embedder in place of the bundled one (what is evicted does not depend on the vectors)
and a model that cannot answer. The clock is moved by replacing
``store.evidence.utc_today``; nothing sleeps.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from toolwire.errors import UsageError
from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.judge import scorer as judge
from toolwire.spec.settings import load_settings
from toolwire.store import LATEST_VERSION, Store, evidence, schema
from toolwire.store.evidence import CachingEmbedder, evict_unused_embeddings, sha256_text

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
DAY0 = date(2026, 3, 1)

NOTES = {
    "kitchen/dal.md": "---\ntitle: Weeknight dal\ntopic: cooking\n---\n"
    "Red lentils, cumin, turmeric; simmer twenty minutes, temper with mustard seeds.\n",
    "net/dns.md": "---\ntitle: DNS checks\ntopic: networking\n---\n"
    "Ask the resolver with dig, compare answers, check TTLs and the search domains.\n",
    "money/budget.md": "---\ntitle: Monthly budget\ntopic: finance\n---\n"
    "Savings rate, rent, groceries; the budget spreadsheet has one row per month.\n",
    "money/taxes.md": "---\ntitle: Tax checklist\ntopic: finance\n---\n"
    "Tax checklist: receipts, deductions, the return is due in April.\n",
}

_WORDS = re.compile(r"\w+")


class HashingEmbedder:
    """Words hashed into 64 buckets (texts sharing words are close); remembers every
    text it embedded, by the key the cache stores it under."""

    name = "hashing-test"

    def __init__(self) -> None:
        self.embedded: dict[str, str] = {}

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), np.float32)
        for i, text in enumerate(texts):
            self.embedded[sha256_text(text)] = text
            for word in _WORDS.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
                out[i, h % 64] += 1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)


@pytest.fixture
def embedder(monkeypatch: pytest.MonkeyPatch) -> Iterator[HashingEmbedder]:
    """Every run's embedder (decisions.load_embedder puts the store's cache in front)."""
    stand_in = HashingEmbedder()
    monkeypatch.setattr(judge, "load_embedder", lambda name: stand_in)
    yield stand_in


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[date]]:
    """The store's day: ``clock[0]``, moved by the test."""
    today = [DAY0]
    monkeypatch.setattr(evidence, "utc_today", lambda: today[0])
    yield today


class Vault:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "notes"
        for rel, text in NOTES.items():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_text(text, encoding="utf-8")
        self.db = tmp / "store.duckdb"
        doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
        (tmp / "empty.jsonl").write_text("", encoding="utf-8")
        doc["model"]["name"] = f"replay:{tmp / 'empty.jsonl'}"
        doc["prompt_pack"] = str(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small")
        doc.pop("schedule", None)
        self.spec = tmp / "spec.yaml"
        self.spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    def run(self) -> dict[str, Any]:
        ctx = prepare_run(self.spec, workspace=self.root, db=self.db)
        try:
            result = run_librarian(ctx)
        finally:
            ctx.provider.close()
        assert result.ok, (result.error_code, result.error_message)
        assert not any("evidence not stored" in w for w in result.warnings)
        cols, rows = Store(self.db).query("SELECT * FROM run_costs WHERE run_id = ?", [ctx.run_id])
        return dict(zip(cols, rows[0], strict=True))

    def settle(self) -> None:
        """Run until a run embeds nothing (the first run may title or tag notes)."""
        for _ in range(5):
            if self.run()["texts_embedded"] == 0:
                return
        raise AssertionError("the vault did not settle in 5 runs")

    def cache(self) -> dict[tuple[str, str, str], tuple[Any, ...]]:
        """Every cached row: key -> (vector, created_at, last_used)."""
        _, rows = Store(self.db).query(
            "SELECT text_sha256, embedder, kind, vector, created_at, last_used FROM embedding_cache"
        )
        return {tuple(r[:3]): tuple(r[3:]) for r in rows}


def test_an_edited_notes_old_text_is_evicted_after_n_days_and_current_rows_stay(
    tmp_path: Path,
    embedder: HashingEmbedder,
    clock: list[date],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLWIRE_KEEP_EMBEDDINGS_DAYS", "7")
    vault = Vault(tmp_path)
    vault.settle()
    taxes = vault.root / "money" / "taxes.md"
    old_text = taxes.read_text(encoding="utf-8")

    clock[0] = DAY0 + timedelta(days=1)  # the user edits a note the next day
    taxes.write_text(old_text.replace("Tax checklist:", "Tax list, zebrafinch:"), "utf-8")
    assert vault.run()["texts_embedded"] >= 1
    rows = vault.cache()
    stale = {k for k, (_, _, used) in rows.items() if used == DAY0}
    current = {k for k, (_, _, used) in rows.items() if used == clock[0]}
    assert stale | current == set(rows)
    # Stale: the edited note's old text, which no run reads any more.
    assert stale and all("Tax checklist:" in embedder.embedded[k[0]] for k in stale)
    assert any("zebrafinch" in embedder.embedded[k[0]] for k in current)

    # Seven days after the old text's last use it is kept (unused for 7 days, not more).
    clock[0] = DAY0 + timedelta(days=7)
    assert vault.run()["texts_embedded"] == 0
    assert set(vault.cache()) == set(rows)

    # One day later it is gone; every row the vault reads stays, marked today.
    clock[0] = DAY0 + timedelta(days=8)
    assert vault.run()["texts_embedded"] == 0
    after = vault.cache()
    assert set(after) == current
    assert {used for _, _, used in after.values()} == {clock[0]}
    assert vault.run()["texts_embedded"] == 0  # nothing the vault needs was evicted


def test_an_unchanged_rerun_evicts_nothing_and_rewrites_only_last_used(
    tmp_path: Path, embedder: HashingEmbedder, clock: list[date], monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = Vault(tmp_path)
    vault.settle()
    # Texts left behind by the settling runs (notes titled since) are evicted later.
    settled = vault.cache()

    vault.run()  # the same day: nothing to mark, nothing to evict, no row touched
    assert vault.cache() == settled

    clock[0] = DAY0 + timedelta(days=3)
    vault.run()
    later = vault.cache()
    assert set(later) == set(settled)
    for key, (vector, created, used) in later.items():
        assert (vector, created) == settled[key][:2]  # the vector and its age untouched
        assert used in (clock[0], DAY0)  # marked, or not read by this run

    # TOOLWIRE_KEEP_EMBEDDINGS_DAYS=0: years unused, nothing is evicted.
    monkeypatch.setenv("TOOLWIRE_KEEP_EMBEDDINGS_DAYS", "0")
    clock[0] = DAY0 + timedelta(days=3000)
    vault.root.joinpath("kitchen", "dal.md").unlink()
    vault.run()
    assert set(vault.cache()) == set(settled)


def test_a_version_11_store_upgrades_and_its_rows_count_as_used_the_day_it_upgrades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = list(schema.MIGRATIONS)
    monkeypatch.setattr(schema, "MIGRATIONS", released[:11])  # a file written by toolwire 11
    old = Store(tmp_path / "old.duckdb")
    for text, vector in (("alpha", [1.0, 0.0]), ("beta", [0.0, 1.0])):
        old.write(
            "INSERT INTO embedding_cache VALUES (?, 'hashing-test', 'passage', ?, ?)",
            [sha256_text(text), vector, "2025-01-01 00:00:00"],
        )
    assert old.schema_version() == 11

    monkeypatch.setattr(schema, "MIGRATIONS", released)
    new = Store(old.path)
    assert new.schema_version() == LATEST_VERSION >= 12
    _, rows = new.query("SELECT vector, created_at, last_used FROM embedding_cache")
    upgraded = evidence.utcnow().date()
    assert sorted(r[0] for r in rows) == [[0.0, 1.0], [1.0, 0.0]]  # vectors kept
    assert {(str(r[1]), r[2]) for r in rows} == {("2025-01-01 00:00:00", upgraded)}

    # The upgraded rows serve lookups, and age from the upgrade, not from created_at.
    inner = HashingEmbedder()
    cached = CachingEmbedder(inner, new)
    np.testing.assert_array_equal(cached.embed_notes(["alpha"]), [[1.0, 0.0]])
    assert inner.embedded == {}
    monkeypatch.setattr(evidence, "utc_today", lambda: upgraded + timedelta(days=30))
    assert cached.mark_used() == 1  # alpha, used now
    cached.embed_notes(["alpha"])
    assert cached.mark_used() == 0  # already marked today: the row is not written again
    assert evict_unused_embeddings(new, 30) == 0  # beta: 30 days, not more
    monkeypatch.setattr(evidence, "utc_today", lambda: upgraded + timedelta(days=31))
    assert evict_unused_embeddings(new, 30) == 1
    _, left = new.query("SELECT text_sha256 FROM embedding_cache")
    assert left == [(sha256_text("alpha"),)]


def test_the_setting_defaults_to_30_days_and_refuses_a_negative_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLWIRE_KEEP_EMBEDDINGS_DAYS", raising=False)
    assert load_settings().keep_embeddings_days == 30
    monkeypatch.setenv("TOOLWIRE_KEEP_EMBEDDINGS_DAYS", "-1")
    with pytest.raises(UsageError, match="TOOLWIRE_KEEP_EMBEDDINGS_DAYS"):
        load_settings()
