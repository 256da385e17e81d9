"""``python -m bench.vault_accuracy FOLDER``: issue 28's benchmark on a labelled folder the
project has never seen (``<label>/<note>.md`` plus an optional ``topics.yaml``), the same
code path as the named corpora, with the bundled embedder."""

from pathlib import Path

import pytest
from bench import vault_accuracy
from bench.vault_accuracy import build_vault, folder_corpus

pytestmark = pytest.mark.local

NOTES = {
    "baking": [
        "Knead the bread dough for ten minutes, then let the yeast rise it overnight.",
        "Sourdough starter: feed it flour and water daily; bake the loaf at 230 C.",
        "Croissants need cold butter folded into the dough, then a slow proof and an oven.",
    ],
    "astronomy": [
        "Jupiter's moons are easy to see with binoculars on a clear night.",
        "A telescope's aperture decides how faint a galaxy or nebula it can show.",
        "The Perseid meteor shower peaks in August; watch from a dark sky site.",
    ],
    "investing": [
        "Index funds spread money over the whole stock market at a low fee.",
        "Rebalance the portfolio yearly between bonds and shares.",
        "Dividends reinvested buy more shares: compounding over decades.",
    ],
}


def _corpus(root: Path, topics: str | None) -> Path:
    for label, texts in NOTES.items():
        (root / label).mkdir(parents=True)
        for i, text in enumerate(texts):
            (root / label / f"note-{i}.md").write_text(f"# {label} {i}\n\n{text}\n")
    (root / "empty").mkdir()  # a folder without notes is no label
    if topics is not None:
        (root / "topics.yaml").write_text(topics)
    return root


def test_a_folder_is_a_corpus_with_its_labels_and_descriptions(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "c", "baking: bread, pastry, ovens\n")
    name = folder_corpus(root)
    assert vault_accuracy.CORPORA[name] == {
        "astronomy": "",
        "baking": "bread, pastry, ovens",
        "investing": "",
    }
    vault = build_vault(name, tmp_path / "vault", tagged_per_topic=1)
    # Flat (the folder must not give the label away), every note labelled by its folder.
    assert sorted(p.name for p in vault.root.iterdir()) == sorted(
        f"note-{i}.md" if n == 0 else f"note-{i}-{n + 1}.md" for n in range(3) for i in range(3)
    )
    assert sorted(vault.labels.values()) == sorted(label for label in NOTES for _ in range(3))
    assert len(vault.tagged) == 3


@pytest.mark.parametrize(
    "topics, error",
    [
        ("cooking: food\n", "not label folders"),
        ("baking: [a, b]\n", "one-line description"),
        ("- baking\n", "one-line description"),
    ],
)
def test_a_bad_topics_file_is_refused(tmp_path: Path, topics: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        folder_corpus(_corpus(tmp_path / "c", topics))


def test_one_label_is_no_corpus(tmp_path: Path) -> None:
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "a.md").write_text("text")
    with pytest.raises(ValueError, match="two or more label folders"):
        folder_corpus(tmp_path)


def test_the_benchmark_runs_on_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _corpus(tmp_path / "c", "astronomy: planets, stars, telescopes\n")
    assert vault_accuracy.main([str(root), "--tagged", "0"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if str(root) in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "nothing tagged" and cells[2] == "9"  # setting, notes judged
    top = float(cells[6].rstrip(" %"))
    assert top >= 8 / 9 * 100  # three plainly different subjects: the embedder reads them
