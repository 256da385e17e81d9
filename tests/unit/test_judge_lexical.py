"""The scorer's words view (judge_lexical.py) and the example arithmetic it shares with
the embeddings (judge_fit.py): what counts as a term, the TF-IDF rows, and that with
the view switched on a topic nobody tagged still wins, one mislabelled example still
steers nothing, and the confidence still orders notes by how clear they are. Shipped
off (judge_fit.LEXICAL_WEIGHT; bench figure 9 says why): these pin it for whoever
switches it on, and pin that it costs nothing while off."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from toolwire.librarian.judge import fit as judge_fit
from toolwire.librarian.judge.fit import _centroid_cosines, fit_scores
from toolwire.librarian.judge.lexical import note_terms, tfidf_rows

pytestmark = pytest.mark.unit


def test_terms_keep_names_whole_and_weigh_title_code_language_and_folders() -> None:
    body = "# Hooks\n\nCall useEffect once.\n\n```ruby\nputs 1\n```\n"
    terms = note_terms("React hooks", "frontend/react-hooks.md", body)
    assert terms["w:useeffect"] == 1  # camelCase is one word, never "use" + "effect"
    assert "w:use" not in terms
    assert terms["w:hooks"] == 1 + 2 + 1  # body heading word, the title twice, the heading
    assert terms["t:react"] == 1
    assert terms["lang:ruby"] == 3
    assert terms["f:frontend"] == 1
    assert "f:react" not in terms  # the file name is not a folder


def test_tfidf_rows_are_unit_length_and_drop_terms_of_one_note() -> None:
    notes = [note_terms("", "a.md", t) for t in ("alpha beta", "alpha gamma", "delta", "")]
    m = tfidf_rows(notes)
    assert m.shape[0] == 4
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    assert np.allclose(norms, [1.0, 1.0, 0.0, 0.0])  # "delta" is in one note only
    assert m.shape[1] == 1  # only "alpha" relates two notes


def test_sparse_and_dense_centroids_agree() -> None:
    rng = np.random.default_rng(0)
    dense = rng.random((12, 7))
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    labels = np.array([0, 0, 1, 1, 2, -1, -1, 0, 1, -1, 2, -1])
    weights = np.where(labels >= 0, rng.random(12) + 0.5, 0.0)
    cos_d, mass_d = _centroid_cosines(dense, labels, weights, 3)
    cos_s, mass_s = _centroid_cosines(sp.csr_matrix(dense), labels, weights, 3)
    assert np.allclose(cos_d, cos_s) and np.allclose(mass_d, mass_s)
    # Leave-one-out: note 4 is topic 2's only other example's partner, never its own.
    own = dense[10] / np.linalg.norm(dense[10])
    assert np.isclose(cos_d[4, 2], dense[4] @ own)


TEXTS = {
    0: "dough flour yeast oven knead bread crumb",
    1: "ledger invoice budget account payment tax",
    2: "train ticket hotel passport luggage flight",
    3: "garden seeds soil compost water prune",
    4: "guitar chord scale strum tuning fret",
    5: "running pace shoes marathon stretch interval",
}


def _notes(per_topic: dict[int, int], seed: int, dims: int = 3) -> tuple[np.ndarray, list[str]]:
    """Notes of each topic: an embedding near the topic's axis, and words drawn from
    the topic's vocabulary plus a filler word every note has."""
    rng = np.random.default_rng(seed)
    vectors, texts = [], []
    for topic, n in per_topic.items():
        for _ in range(n):
            v = np.eye(dims)[topic] + 0.15 * rng.standard_normal(dims)
            vectors.append(v / np.linalg.norm(v))
            words = rng.choice(TEXTS[topic].split(), size=4, replace=False)
            texts.append(" ".join([*words, "notes"]))
    return np.array(vectors), texts


def _rows(texts: list[str]) -> object:
    return tfidf_rows([note_terms("", "n.md", t) for t in texts])


@pytest.fixture
def words_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_fit, "LEXICAL_WEIGHT", 0.5)


@pytest.mark.usefixtures("words_on")
def test_with_words_a_topic_nobody_tagged_still_wins_its_notes() -> None:
    vectors, texts = _notes({0: 10, 1: 10, 2: 6}, seed=1)
    tagged = np.array([0] * 10 + [1] * 10 + [-1] * 6)  # no note of topic 2 tagged
    fit = fit_scores(vectors, np.eye(3), tagged, np.zeros((26, 3)), _rows(texts))
    assert (fit.fused[20:].argmax(axis=1) == 2).all()


@pytest.mark.usefixtures("words_on")
def test_with_words_one_mislabelled_example_steers_nothing() -> None:
    vectors, texts = _notes({0: 8, 1: 8}, seed=2)
    lexical = _rows(texts)
    clean = np.full(16, -1)
    steered = clean.copy()
    steered[8] = 2  # a topic-1 note tagged with topic 2, the only example of topic 2
    before = fit_scores(vectors, np.eye(3), clean, np.zeros((16, 3)), lexical)
    after = fit_scores(vectors, np.eye(3), steered, np.zeros((16, 3)), lexical)
    others = [i for i in range(16) if i != 8]
    assert (before.fused.argmax(axis=1) == [0] * 8 + [1] * 8).all()
    assert (after.fused[others].argmax(axis=1) == before.fused[others].argmax(axis=1)).all()
    assert after.examples[:, 2].max() == 0  # the implausible tag taught topic 2 nothing


@pytest.mark.parametrize("words", [0.0, 0.5])
def test_tagged_notes_outweigh_a_wrong_one_and_an_ambiguous_note_is_least_sure(
    monkeypatch: pytest.MonkeyPatch, words: float
) -> None:
    monkeypatch.setattr(judge_fit, "LEXICAL_WEIGHT", words)
    vectors, texts = _notes({t: 6 for t in range(6)}, seed=3, dims=6)
    # One more note, halfway between topics 0 and 1, with words of both.
    vectors = np.vstack([vectors, (np.eye(6)[0] + np.eye(6)[1]) / np.sqrt(2)])
    texts.append("dough yeast ledger invoice notes")
    tagged = np.full(37, -1)
    tagged[[0, 1, 6, 7, 12, 18, 24, 30]] = [0, 0, 1, 1, 2, 3, 4, 5]
    tagged[2] = 1  # a topic-0 note tagged topic 1: two right tags of 0 outvote it
    fit = fit_scores(vectors, np.eye(6), tagged, np.zeros((37, 6)), _rows(texts))
    assert (fit.fused[3:6].argmax(axis=1) == 0).all()
    conf = fit.probs.max(axis=1)
    assert conf[36] < conf[:36].min()  # the ambiguous note is the least sure
    assert set(np.argsort(-fit.probs[36])[:2].tolist()) == {0, 1}


def test_off_as_shipped_the_scorer_never_loads_scipy() -> None:
    code = (
        "import sys\n"
        "from toolwire.librarian.judge.scorer import NoteEvidence, TopicScorer\n"
        "notes = [NoteEvidence(str(i), f'{i}.md', '', t, None)"
        " for i, t in enumerate(['bread dough', 'tax ledger'])]\n"
        "TopicScorer(['cooking', 'finance']).score(notes)\n"
        "print('scipy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert judge_fit.LEXICAL_WEIGHT == 0
    assert out.stdout.strip() == "False"
