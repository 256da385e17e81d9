"""Synthetic vaults of any size for the run-cost figures (6), and a stand-in embedder.

A vault is built from real note texts (``data/notes`` and the shared runbooks), each
copy varied (a different first line and file name), with 20 % of the notes untitled
(no front-matter title, no H1), as in issue 29's measurements.

The stand-in embedder maps a text to a fixed pseudo-random unit vector (seeded by its
sha256): it costs nothing, so a run with it measures everything *but* the embedder.
An unchanged re-run never calls the embedder at all (every text is a cache hit), so
its cost with the stand-in is its real cost; a fresh run's real cost is the stand-in
run plus the real embedder's per-text cost, measured apart on real notes.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.fixtures import NOTES_DIR, runbooks_dir

__all__ = ["StandInEmbedder", "build_vault", "edit_notes", "stand_in_embedder"]

_WORDS = re.compile(r"[^\W_]{3,}")
_ID = re.compile(r"^id:.*\n", re.M)
_H1 = re.compile(r"^# .*\n?", re.M)
_TITLE = re.compile(r"^title:.*\n", re.M)
_OPENERS = (
    "Seen again during the {n}th on-call shift.",
    "Copied from the team wiki, revision {n}.",
    "Draft {n}, still to be checked.",
    "Notes taken at meeting {n}.",
    "Reminder {n} for next quarter.",
)


def _sources() -> list[tuple[str, str]]:
    """(stem, text) of every real note this builder varies."""
    out = []
    for root in (NOTES_DIR, runbooks_dir() / "notes"):
        if root.is_dir():
            for path in sorted(root.rglob("*.md")):
                out.append((path.stem, path.read_text(encoding="utf-8")))
    return out


def _untitled(text: str) -> str:
    text = _TITLE.sub("", text)
    text = text.replace("---\n---\n", "", 1)
    return _H1.sub("", text, count=1)


def build_vault(root: Path, count: int, *, untitled: float = 0.2, seed: int = 29) -> Path:
    """``count`` notes under ``root`` (in folders of 100), a fifth of them untitled."""
    rng = random.Random(seed)
    sources = _sources()
    for i in range(count):
        stem, text = sources[i % len(sources)]
        opener = _OPENERS[i % len(_OPENERS)].format(n=i)
        if text.startswith("---\n"):
            end = text.index("\n---\n", 4) + 5
            text = f"{text[:end]}{opener}\n\n{text[end:]}"
        else:
            text = f"{opener}\n\n{text}"
        text = _ID.sub("", text)  # copies of one note must not share its front-matter id
        if rng.random() < untitled:
            text = _untitled(text)
        path = root / f"part-{i // 100:03d}" / f"{stem}-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def edit_notes(root: Path, share: float, *, seed: int = 7) -> list[Path]:
    """Edit ``share`` of the notes (at least one): a new sentence after the opener."""
    paths = sorted(root.rglob("*.md"))
    rng = random.Random(seed)
    chosen = rng.sample(paths, max(1, round(share * len(paths))))
    for path in chosen:
        text = path.read_text(encoding="utf-8")
        path.write_text(
            text.replace("\n\n", "\n\nEdited: the numbers changed since.\n\n", 1),
            encoding="utf-8",
        )
    return chosen


class StandInEmbedder:
    """A nearly free embedder: words hashed into 384 buckets (the hashing trick), so
    texts that share words are close, as with a real embedder, and runs settle."""

    name = "stand-in"
    dim = 384

    def __init__(self) -> None:
        self.texts = 0

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in _WORDS.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0 if h & 1 << 31 else -1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)


@contextmanager
def stand_in_embedder() -> Iterator[StandInEmbedder]:
    """Every run in the block gets the stand-in instead of the spec's embedder."""
    from toolwire.librarian.judge import scorer as judge

    stand_in = StandInEmbedder()
    real = judge.load_embedder
    judge.load_embedder = lambda name: stand_in  # type: ignore[assignment]
    try:
        yield stand_in
    finally:
        judge.load_embedder = real  # type: ignore[assignment]
