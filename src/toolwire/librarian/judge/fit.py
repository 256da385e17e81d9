"""The topic scorer's arithmetic: every note against every topic, in numpy.

Inputs are unit vectors (one per note, its chunks pooled; one prototype per topic
from its name and description), keyword and folder evidence, and the topics the
user already gave some notes. Three steps, each chosen by measurement
(``bench/vault_accuracy.py``, on the development corpora only):

1. **Zero-shot**: cosine of note to topic prototype. Cosines of one note sit in a
   narrow band whose width varies with the taxonomy, so each note's row is
   standardised (z-scores across topics) before anything is added to it.
2. **Examples**: each topic's centroid of example notes (leave-one-out: a note is
   never its own example), also z-scored per note and added with weight
   ``EXAMPLE_WEIGHT``. Examples are the user's tagged notes, each weighted by how
   plausible its tag looks from the other evidence (issue 30 item 16: one
   mislabelled note cannot drag its topic to another subject: its weight falls to
   ``MIN_PLAUSIBILITY``), and, for self-training, this run's confident decisions.
   A topic with no examples still competes: in its example column it scores its
   zero-shot z-score, so having examples does not lift a topic on every note.
3. **Confidence**: a softmax over the fused scores. Its temperature is fitted at run
   time by likelihood on the user's tagged notes (leave-one-out) when there are
   enough of them (only ever more cautious than the default), else it is the
   default: a factor times the log of the number of topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from toolwire.librarian.judge.vault_evidence import backed_topics

# A dense array or a scipy.sparse matrix (the words view): what ``@`` multiplies.
Matrix = Any

__all__ = ["Fit", "default_temperature", "fit_scores", "softmax"]

# Weight of the example (centroid) z-scores against the zero-shot z-scores.
EXAMPLE_WEIGHT = 1.0
# Keyword hits (log1p) and the topic being one of the note's folders, in z units.
KEYWORD_WEIGHT = 0.5
FOLDER_WEIGHT = 2.0
# A user's tagged note counts this many times a self-trained one.
USER_WEIGHT = 3.0
# A note's example z-scores need this many topics with a centroid; with fewer, the
# zero-shot z-scores stand in (z-scores over two values are +-1 whatever the cosines:
# a note halfway between two tagged topics came out 99.5 % sure of one).
MIN_CENTROID_TOPICS = 3
# Floor of a tagged example's plausibility weight (its tag's leave-one-out probability).
MIN_PLAUSIBILITY = 0.02
# The words view (judge_lexical): weight of its centroid z-scores, and how many
# examples' weight a topic's words centroid needs to count half (the rest is the
# zero-shot z-score). Off (0) as shipped: measured in bench/RESULTS.md figure 9
# (``python -m bench.vault_accuracy --variant words``), it raised the development
# corpus's top choice from 81 % to 84 % and its coverage at >= 95 % precision from
# 67 % to 72 %, but gained nothing on the held-out half of that corpus and lowered the
# held-out course notes' top choice (65 % -> 59 %) and precision (92 % -> 82 %): the
# words of notes the run labelled itself repeat the zero-shot view's mistakes.
LEXICAL_WEIGHT = 0.0
LEXICAL_SHRINK = 4.0
# Self-training: untagged notes at least this confident become examples.
PSEUDO_CONFIDENCE = 0.5
SELF_TRAINING_ROUNDS = 2
# Softmax temperature on fused z-scores when it cannot be fitted on tagged notes.
SELF_TRAINING_TEMPERATURE = 0.8
# The confidence's temperature without enough tags grows with the log of the number of
# topics (with more topics, the best of many noisy scores stands out by chance more
# often): the smallest factor that kept applied precision >= 95 % on both development
# corpora (runbooks, 8 topics; til-dev, 18 topics), nothing tagged and 3 per topic.
TEMPERATURE_PER_LOG_TOPIC = 0.35
# Tagged notes needed (across at least two topics) to fit the temperature on them.
MIN_FIT_NOTES = 8


def softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    z = (scores - scores.max(axis=1, keepdims=True)) / temperature
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _zrows(m: np.ndarray) -> np.ndarray:
    std = m.std(axis=1, keepdims=True)
    return (m - m.mean(axis=1, keepdims=True)) / np.where(std < 1e-9, 1.0, std)


def _centroid_cosines(
    vectors: Matrix, labels: np.ndarray, weights: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of each note to each topic's weighted centroid of examples, without the
    note itself; and the example weight behind each cell (0: no centroid). ``vectors``:
    unit rows, dense (embeddings) or scipy.sparse (the words view)."""
    n = vectors.shape[0]
    own = np.flatnonzero(labels >= 0)
    members = np.zeros((n, k))
    members[own, labels[own]] = weights[own]
    sums = np.asarray(vectors.T @ members)  # (dims, topics)
    dots = np.asarray(vectors @ sums)  # (notes, topics)
    norms2 = np.tile((sums**2).sum(axis=0), (n, 1))
    cell_mass = np.tile(members.sum(axis=0), (n, 1))
    if len(own):
        j, w = labels[own], weights[own]
        norms2[own, j] = norms2[own, j] - 2 * w * dots[own, j] + w**2
        dots[own, j] -= w  # the note's own vector (unit) leaves its topic's sum
        cell_mass[own, j] -= w
    norms = np.sqrt(np.clip(norms2, 1e-18, None))
    cos = np.where(cell_mass > 1e-9, dots / norms, 0.0)
    return cos, cell_mass


def _example_scores(
    zero_shot: np.ndarray,
    vectors: Matrix,
    labels: np.ndarray,
    weights: np.ndarray,
    shrink: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-note z-scores of centroid cosines, over the topics that have a centroid for
    that note; a topic without one scores its zero-shot z-score instead, so a topic
    nobody gave examples to still wins the notes that look like it. ``shrink``: a
    centroid of ``m`` examples' weight counts ``m / (m + shrink)``, the rest is the
    zero-shot z-score (a centroid of three notes' words is mostly their accidents)."""
    cos, mass = _centroid_cosines(vectors, labels, weights, zero_shot.shape[1])
    has = mass > 1e-9
    fallback = _zrows(zero_shot)
    if not has.any():
        return fallback, mass
    n_has = has.sum(axis=1, keepdims=True)
    mean = np.where(has, cos, 0.0).sum(axis=1, keepdims=True) / np.maximum(n_has, 1)
    var = np.where(has, (cos - mean) ** 2, 0.0).sum(axis=1, keepdims=True) / np.maximum(n_has, 1)
    std = np.sqrt(var)
    z = (cos - mean) / np.where(std < 1e-9, 1.0, std)
    if shrink > 0:
        share = mass / (mass + shrink)
        z = share * z + (1 - share) * fallback
    return np.where(has & (n_has >= MIN_CENTROID_TOPICS), z, fallback), mass


def fit_temperature(scores: np.ndarray, truth: np.ndarray) -> float:
    """The softmax temperature that maximises the likelihood of ``truth`` (grid search)."""
    grid = np.exp(np.linspace(np.log(0.05), np.log(5.0), 60))
    rows = np.arange(len(truth))
    nll = [-np.log(softmax(scores, t)[rows, truth] + 1e-12).mean() for t in grid]
    return float(grid[int(np.argmin(nll))])


@dataclass(frozen=True)
class Fit:
    fused: np.ndarray  # (notes, topics) fused scores, z units
    probs: np.ndarray  # calibrated confidence
    zero_shot: np.ndarray  # raw cosines to the topics' prototypes
    examples: np.ndarray  # example notes behind each cell (tagged and self-trained)
    temperature: float
    calibrated_on: str  # "tagged notes" or "default"
    # The topic is the one the user's own examples point to (``vault_evidence``): only such
    # a topic may be applied to a note that has none.
    backed: np.ndarray


def fit_scores(
    vectors: np.ndarray,
    prototypes: np.ndarray,
    tagged: np.ndarray,
    prior: np.ndarray,
    lexical: Matrix | None = None,
) -> Fit:
    """Scores of every note (``vectors``) for every topic (``prototypes``).

    ``tagged[i]``: the topic index the user gave note i, -1 for none; ``prior``: the
    keyword and folder evidence already in z units; ``lexical``: the notes' words view
    (``judge_lexical.tfidf_rows``), a second set of example centroids.
    """
    zero_shot = vectors @ prototypes.T
    base = _zrows(zero_shot) + prior
    user = tagged >= 0

    def fused_with(labels: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        examples, mass = _example_scores(zero_shot, vectors, labels, weights)
        fused = base + EXAMPLE_WEIGHT * examples
        if lexical is not None and LEXICAL_WEIGHT:
            by_words, _ = _example_scores(zero_shot, lexical, labels, weights, LEXICAL_SHRINK)
            fused = fused + LEXICAL_WEIGHT * by_words
        return fused, mass

    weights = np.where(user, USER_WEIGHT, 0.0)
    # Plausibility of each tag: its leave-one-out probability with the other examples.
    fused, mass = fused_with(tagged, weights)
    if user.any():
        probs = softmax(fused, SELF_TRAINING_TEMPERATURE)
        plausible = probs[np.flatnonzero(user), tagged[user]]
        weights[user] = np.where(plausible >= MIN_PLAUSIBILITY, USER_WEIGHT, 0.0)
    backed = backed_topics(vectors, np.where(weights > 0, tagged, -1), len(prototypes))
    labels = tagged.copy()
    for _ in range(SELF_TRAINING_ROUNDS):
        fused, mass = fused_with(labels, weights)
        probs = softmax(fused, SELF_TRAINING_TEMPERATURE)
        sure = (~user) & (probs.max(axis=1) >= PSEUDO_CONFIDENCE)
        labels = np.where(user, tagged, np.where(sure, probs.argmax(axis=1), -1))
        weights = np.where(user, weights, np.where(sure, probs.max(axis=1), 0.0))
    fused, mass = fused_with(labels, weights)
    # Tags too implausible to learn from (likely wrong) do not calibrate either.
    temperature, calibrated_on = _temperature(fused, np.where(weights > 0, tagged, -1))
    # What a person reads: how many notes (tagged or self-trained) taught each topic,
    # the note itself never among them.
    used = labels >= 0
    counts = np.tile(np.bincount(labels[used], minlength=len(prototypes)), (len(vectors), 1))
    counts[np.flatnonzero(used), labels[used]] -= 1
    counts = np.where(mass > 1e-9, counts, 0)
    probs = softmax(fused, temperature)
    return Fit(fused, probs, zero_shot, counts, temperature, calibrated_on, backed)


def default_temperature(topics: int) -> float:
    return TEMPERATURE_PER_LOG_TOPIC * float(np.log(max(topics, 2)))


def _temperature(fused: np.ndarray, tagged: np.ndarray) -> tuple[float, str]:
    default = default_temperature(fused.shape[1])
    user = tagged >= 0
    if user.sum() >= MIN_FIT_NOTES and len(set(tagged[user].tolist())) >= 2:
        fitted = fit_temperature(fused[user], tagged[user])
        # The user's tags can make the confidence more cautious (a taxonomy the scorer
        # reads badly), never bolder than the default: a few dozen tags are a small
        # sample, and the ones it could not place were left out above.
        fitted = float(np.clip(fitted, default, default * 2))
        return fitted, "tagged notes"
    return default, "default"
