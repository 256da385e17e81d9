"""Migration 13 (note_evidence_left_bytes) on a real file written at version 12.

A retag's ledger row written before held the bytes the run judged, not the bytes it
left, so a fresh copy of those notes passed as already done (the quick start run twice
on one store applied nothing). The upgrade forgets those rows (each note is decided
again once) and keeps every other decision.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.store import LATEST_VERSION, Store, schema
from toolwire.store.evidence import DecisionLedger, NoteRecord

pytestmark = pytest.mark.local


def test_an_old_ledger_forgets_its_retags_and_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = list(schema.MIGRATIONS)
    monkeypatch.setattr(schema, "MIGRATIONS", released[:12])  # a file written by toolwire 12
    old = Store(tmp_path / "old.duckdb")
    records = {
        "a": NoteRecord("sha-a", "key-a", "retag", "cooking"),
        "b": NoteRecord("sha-b", "key-b", "keep", "travel"),
        "c": NoteRecord("sha-c", "key-c", "defer", "finance"),
    }
    DecisionLedger(old, "/vault").save("run-1", records, {})
    assert old.schema_version() == 12

    monkeypatch.setattr(schema, "MIGRATIONS", released)
    new = Store(old.path)
    assert new.schema_version() == LATEST_VERSION >= 13
    assert DecisionLedger(new, "/vault").load() == {k: records[k] for k in ("b", "c")}
