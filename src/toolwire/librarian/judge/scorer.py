"""The librarian's judgement: which topic each note belongs to, and how sure we are.

A 135M chat model is at chance as a topic chooser whatever the prompt (bench figure 5),
so topics are chosen by an instrument built for it, from evidence the system computes
(the arithmetic is in :mod:`.fit`, what is read of a note in :mod:`.text`):

- **semantic**: cosine between the note (its title, file name and headings, and up
  to four chunks spread over its whole body, averaged) and each topic (its name and
  its one-line description), from a bundled embedding model;
- **keywords**: whole-word occurrences of the topic's name ("GitHub" is not git);
- **folder**: the topic's name is one of the note's folders;
- **examples**: the notes the user already tagged (each weighted by how plausible
  its tag is, so one mislabelled note cannot steer a topic), then this run's
  confident decisions (self-training), pull notes towards their topics' centroids
  (in the embeddings; a second view, the notes' words, is in :mod:`.lexical`,
  off as shipped: ``fit.LEXICAL_WEIGHT`` says why);
- **links**: the topics of the notes a note links to (their confidences, averaged).

The *confidence* is a softmax over the fused scores, with a temperature fitted at run
time on the user's tagged notes when there are enough (else a default that bench
``vault_accuracy`` checks on corpora it was not fitted on).

The decision for a note then follows one rule, "never worse": a note that already
has a taxonomy topic keeps it, always: the librarian never replaces or removes a
user's topic on its own (issue 28: on a project's documentation nobody tuned for, the
old "replace when ruled out" rule broke 2 correct tags). A kept topic the scorer rates
far below another is flagged ``misfiled``: ``toolwire review`` asks the user about
it, and the run's warnings count it. A note without a topic is retagged when the best
topic is confident enough (``min_confidence``), else deferred with its candidates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from toolwire.embedder import Embedder
from toolwire.embedders import load_embedder
from toolwire.embedders.rows import unit
from toolwire.librarian.judge import fit as judge_fit
from toolwire.librarian.judge.fit import Fit, fit_scores
from toolwire.librarian.judge.lexical import note_terms, tfidf_rows
from toolwire.librarian.judge.text import keyword_counts, note_chunks, words
from toolwire.librarian.judge.vault_evidence import question_order
from toolwire.librarian.notes.workspace import extract_links
from toolwire.run.phases import embed_note_texts

__all__ = [
    "Candidate",
    "Embedder",
    "NoteEvidence",
    "NoteJudgement",
    "TopicScorer",
    "decide",
    "in_question_order",
    "keyword_counts",
    "load_embedder",
    "note_text",
]

# Links: the linked notes' mean confidence per topic, added in z units with this weight.
LINK_WEIGHT = 1.0
# "Misfiled": a kept current topic at most this confident while the best is at least
# MISFILED_FACTOR times as confident (issue 28: 30 of 32 wrong tags were under 10 %).
MISFILED_MAX_CONFIDENCE = 0.10
MISFILED_FACTOR = 5.0

Decision = Literal["keep", "retag", "defer"]
UNBACKED = (
    "the notes you tagged or answered do not point to it yet (a topic is applied only "
    "where your own examples agree: answer a few questions in toolwire review)"
)


@dataclass(frozen=True, slots=True)
class NoteEvidence:
    """What the scorer reads of one note."""

    note_id: str
    path: str
    title: str
    body: str
    current: str | None  # the taxonomy topic the note has now (front matter), if any
    links: tuple[str, ...] = ()  # ids of the notes it links to (else read from its body)
    # ``current`` is the user's word (they wrote it, answered it, or edited the note since
    # a run wrote it). A topic a run wrote is kept but teaches nothing (issue 41: a run
    # that learnt from its own tags applied 4 new topics to an unchanged vault, 2 wrong).
    confirmed: bool = True


@dataclass(frozen=True, slots=True)
class Candidate:
    topic: str
    confidence: float  # calibrated probability that this topic is the right one
    score: float  # fused score
    semantic: float
    keyword_hits: int
    in_folder: bool
    examples: int
    # The user's own examples (tagged or answered notes) point to this topic too
    # (``vault_evidence.backed_topics``): a retag needs it.
    backed: bool = False

    def evidence(self) -> str:
        """One short line a person (or a model) can check."""
        parts = [f"similarity {self.semantic:.2f}"]
        if self.keyword_hits:
            parts.append(f"named {self.keyword_hits}x")
        if self.in_folder:
            parts.append("folder")
        if self.examples:
            parts.append(f"{self.examples} example{'s' if self.examples != 1 else ''}")
        return f"{self.topic} {self.confidence:.2f} ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class NoteJudgement:
    note_id: str
    current: str | None
    candidates: tuple[Candidate, ...]  # best first
    decision: Decision
    why: str
    # The note keeps a topic the scorer rates far below another (a question for review).
    misfiled: bool = False
    # As a question (deferred or misfiled): its place in the order that teaches most
    # (``vault_evidence.question_order``) and how many notes an answer is expected to
    # decide, itself included.
    ask_rank: int = 0
    decides: int = 1

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    @property
    def topic(self) -> str | None:
        """The topic the note ends with under this judgement."""
        return self.best.topic if self.decision == "retag" else self.current


def note_text(note: NoteEvidence) -> str:
    """The first text the embedding model reads of a note (its head and body start)."""
    return note_chunks(note.title, note.path, note.body)[0]


def _in_folder(path: str, topic: str) -> bool:
    return words(topic) in [words(part) for part in path.split("/")[:-1]]


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
        self.fit: Fit | None = None  # the last score()'s fit (temperature, for reports)
        self.vectors: np.ndarray | None = None  # the last score()'s note vectors

    def _topic_prototypes(self) -> np.ndarray:
        """Each topic's name and, when given, ``name: description``, averaged."""
        if self._prototypes is None:
            assert self.embedder is not None
            names = self.embedder.embed_topics(self.topics)
            described = [
                f"{t}: {self.descriptions[t]}" if t in self.descriptions else t for t in self.topics
            ]
            self._prototypes = unit(names + self.embedder.embed_topics(described))
        return self._prototypes

    def _note_vectors(self, notes: Sequence[NoteEvidence]) -> np.ndarray:
        """One unit vector per note: its chunks' vectors averaged, the first (which
        carries the title and headings) counted twice (one embed call for all)."""
        assert self.embedder is not None
        chunks = [note_chunks(n.title, n.path, n.body) for n in notes]
        # One embed call for all unless the CLI shows progress (then in chunks, per note).
        vectors = embed_note_texts(self.embedder, chunks).astype(np.float64)
        out, start = np.empty((len(notes), vectors.shape[1])), 0
        for i, texts in enumerate(chunks):
            own = vectors[start : start + len(texts)]
            out[i] = own.sum(axis=0) + own[0]
            start += len(texts)
        return unit(out)

    def score(self, notes: Sequence[NoteEvidence]) -> list[list[Candidate]]:
        """Candidates per note, best first."""
        if not notes:
            return []
        k = len(self.topics)
        hits = np.array(
            [
                list(keyword_counts(f"{n.path} {n.title} {n.body}", self.topics).values())
                for n in notes
            ],
            dtype=np.float64,
        )
        folder = np.array([[_in_folder(n.path, t) for t in self.topics] for n in notes], float)
        prior = judge_fit.KEYWORD_WEIGHT * np.log1p(hits) + judge_fit.FOLDER_WEIGHT * folder
        tagged = np.array(
            [
                self.topics.index(n.current) if n.confirmed and n.current in self.topics else -1
                for n in notes
            ]
        )
        lexical = (
            tfidf_rows([note_terms(n.title, n.path, n.body) for n in notes])
            if judge_fit.LEXICAL_WEIGHT
            else None
        )
        if self.embedder is not None:
            vectors = self._note_vectors(notes)
            self.vectors = vectors
            protos = self._topic_prototypes().astype(np.float64)
            fit = fit_scores(vectors, protos, tagged, prior, lexical)
        else:  # keyword, folder and words evidence only
            fit = fit_scores(np.zeros((len(notes), 1)), np.zeros((k, 1)), tagged, prior, lexical)
        fit = _with_links(fit, notes)
        self.fit = fit
        out = []
        for i in range(len(notes)):
            ranked = sorted(range(k), key=lambda j: (-fit.fused[i, j], j))
            out.append(
                [
                    Candidate(
                        topic=self.topics[j],
                        confidence=round(float(fit.probs[i, j]), 4),
                        score=round(float(fit.fused[i, j]), 4),
                        semantic=round(float(fit.zero_shot[i, j]), 4),
                        keyword_hits=int(hits[i, j]),
                        in_folder=bool(folder[i, j]),
                        examples=int(fit.examples[i, j]),
                        backed=bool(fit.backed[i, j]),
                    )
                    for j in ranked
                ]
            )
        return out


def _linked_notes(notes: Sequence[NoteEvidence]) -> list[list[int]]:
    """For each note, the indexes of the notes it links to: ``links`` when given, else
    the links in its body matched by id, path or file name (case-insensitive)."""
    keys: dict[str, set[int]] = {}
    for i, n in enumerate(notes):
        stem = n.path.rsplit("/", 1)[-1].removesuffix(".md")
        for key in {n.note_id, n.path, n.path.removesuffix(".md"), stem}:
            keys.setdefault(key.lower(), set()).add(i)
    out = []
    for i, n in enumerate(notes):
        targets = n.links or extract_links(n.body)
        found: set[int] = set()
        for target in targets:
            key = target.lower().removesuffix(".md").lstrip("./")
            hits = keys.get(key) or keys.get(key.rsplit("/", 1)[-1]) or set()
            if len(hits) == 1:  # an ambiguous name links to nothing in particular
                found |= hits
        found.discard(i)
        out.append(sorted(found))
    return out


def _with_links(fit: Fit, notes: Sequence[NoteEvidence]) -> Fit:
    """Each note's fused scores plus the mean confidence of the notes it links to."""
    linked = _linked_notes(notes)
    if not any(linked) or LINK_WEIGHT == 0:
        return fit
    bonus = np.zeros_like(fit.fused)
    for i, targets in enumerate(linked):
        if targets:
            bonus[i] = fit.probs[targets].mean(axis=0)
    fused = fit.fused + LINK_WEIGHT * bonus
    probs = judge_fit.softmax(fused, fit.temperature)
    return Fit(
        fused, probs, fit.zero_shot, fit.examples, fit.temperature, fit.calibrated_on, fit.backed
    )


def decide(
    note: NoteEvidence,
    candidates: Sequence[Candidate],
    *,
    min_confidence: float,
) -> NoteJudgement:
    """Keep, retag or defer one note (the "never worse" rule in the module docstring)."""
    best = candidates[0]
    current = next((c for c in candidates if c.topic == note.current), None)
    if current is not None:
        # The user's topic is evidence the scorer cannot see: a correctly tagged note can
        # look misfiled to it (bench vault_accuracy: 2 of 27 on traefik-docs were put at
        # <= 0.01 with another at >= 0.9). So it stays, and a person is asked.
        if best.topic == current.topic:
            why = f"keeps {current.topic}: the best evidence ({best.evidence()})"
            return _judged(note, candidates, "keep", why)
        misfiled = current.confidence <= MISFILED_MAX_CONFIDENCE and (
            best.confidence >= MISFILED_FACTOR * max(current.confidence, 1e-4)
        )
        why = f"keeps {current.topic} ({current.confidence:.3f}): the user's topic stays"
        why += f"; best {best.evidence()}"
        if misfiled:
            why += f"; {current.topic} looks misfiled: a question for toolwire review"
        return _judged(note, candidates, "keep", why, misfiled)
    if best.confidence < min_confidence:
        why = f"best {best.evidence()} is below min_confidence {min_confidence:g}"
        return _judged(note, candidates, "defer", why)
    if not best.backed:
        # Trust before reach (issue 41): the scorer's confidence is not honest on a
        # taxonomy it has never seen; a topic is applied only where the user's own
        # examples agree, and a vault that has shown none is asked first.
        why = f"best {best.evidence()}, but {UNBACKED}"
        return _judged(note, candidates, "defer", why)
    return _judged(note, candidates, "retag", best.evidence())


def in_question_order(
    notes: Sequence[NoteEvidence], judgements: Sequence[NoteJudgement], scorer: TopicScorer
) -> list[NoteJudgement]:
    """The judgements with the questions among them (deferred, misfiled) ranked: deferred
    notes in the order that teaches most (``vault_evidence.question_order``), misfiled
    ones after them; each with the notes an answer is expected to decide."""
    fit = scorer.fit
    deferred = np.array([j.decision == "defer" for j in judgements], dtype=bool)
    if fit is None or not deferred.any():
        return list(judgements)
    vectors = scorer.vectors if scorer.vectors is not None else np.zeros((len(notes), 1))
    labels = np.array(
        [
            scorer.topics.index(n.current) if n.confirmed and n.current in scorer.topics else -1
            for n in notes
        ]
    )
    order, decides = question_order(vectors, fit.probs, labels, deferred)
    rank = {i: r for r, i in enumerate(order)}
    out = []
    for i, j in enumerate(judgements):
        if i in rank:
            j = replace(j, ask_rank=rank[i], decides=decides[i])
        elif j.misfiled:
            j = replace(j, ask_rank=len(order) + i)
        out.append(j)
    return out


def _judged(
    note: NoteEvidence,
    candidates: Sequence[Candidate],
    decision: Decision,
    why: str,
    misfiled: bool = False,
) -> NoteJudgement:
    return NoteJudgement(note.note_id, note.current, tuple(candidates), decision, why, misfiled)


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
