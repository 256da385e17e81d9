"""What the topic scorer reads of a note: the texts it embeds and the words it counts.

- **Embedded texts**: the note's head (title, file name, headings) with the start of
  its body, then further chunks of the body, so a long note is read beyond its first
  screen. Chunks break at paragraph ends; a note longer than ``MAX_CHUNKS`` chunks is
  read at evenly spaced chunks (its start always). Embedding costs about 0.3-0.4
  CPU-s per 600 characters with e5-small, so the chunks per note are capped.
- **Keywords**: whole words, split at anything that is not a letter or digit and
  never inside a word, so "JavaScript", "TypeScript", "MySQL" count for their topics
  and "GitHub" does not count for git. A topic named with several words
  (``prometheus-operator``) also matches them written together
  (``PrometheusOperator``); longer names are counted first and their matches removed,
  so a note about ``prometheus-operator`` is not also counted for ``prometheus``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

__all__ = [
    "CHUNK_CHARS",
    "MAX_CHUNKS",
    "headings",
    "keyword_counts",
    "note_chunks",
    "path_words",
    "words",
]

# One chunk is about what e5-small reads well in one pass (~250-350 tokens of its 512).
CHUNK_CHARS = 1200
# At most this many chunks per note: a long note costs ~MAX_CHUNKS x a short one.
MAX_CHUNKS = 4
# Characters of headings put in the head text.
HEADINGS_CHARS = 300

_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)


def words(text: str) -> list[str]:
    """Lowercase words: runs of letters and digits (never split inside a word)."""
    return re.findall(r"[^\W_]+", text.lower())


def path_words(path: str) -> str:
    """The file's path as words (``ops/dns-cache-flush.md`` -> ``ops dns cache flush``)."""
    stem = path[:-3] if path.endswith(".md") else path
    return " ".join(words(stem))


def headings(body: str) -> list[str]:
    """The markdown headings of ``body``, outside code fences."""
    return _HEADING.findall(_FENCE.sub("", body))


def _paragraph_chunks(body: str, size: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", body.strip()):
        if len(para) > size:  # a paragraph longer than a chunk is cut
            if current:
                chunks.append(current)
                current = ""
            # Cut at offsets: ``para = para[size:]`` in a loop copied the rest each time,
            # and a 50 MB one-paragraph note took 6 minutes of memcpy before embedding.
            cut = len(para) - len(para) % size or len(para) - size
            chunks.extend(para[i : i + size] for i in range(0, cut, size))
            para = para[cut:]
        if current and len(current) + len(para) + 2 > size:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        chunks.append(current)
    return chunks


def note_chunks(title: str, path: str, body: str, max_chunks: int = MAX_CHUNKS) -> list[str]:
    """The texts embedded for one note, at most ``max_chunks``; the first carries the
    note's head (title, file name, headings)."""
    heads = " / ".join(headings(body))[:HEADINGS_CHARS]
    head = "\n".join(part for part in (title, path_words(path), heads) if part)
    chunks = _paragraph_chunks(body, CHUNK_CHARS) or [""]
    if len(chunks) > max_chunks:
        step = (len(chunks) - 1) / (max_chunks - 1) if max_chunks > 1 else 0
        chunks = [chunks[round(i * step)] for i in range(max_chunks)]
    first = f"{head}\n{chunks[0]}"[: CHUNK_CHARS + HEADINGS_CHARS]
    return [first, *chunks[1:]]


def keyword_counts(text: str, topics: Sequence[str]) -> dict[str, int]:
    """Whole-word occurrences of each topic's name in ``text``, longest names first
    (module docstring); keys in ``topics`` order."""
    tokens = words(text)
    found: dict[str, int] = {}
    for topic in sorted(topics, key=lambda t: -len(words(t))):
        name = words(topic)
        n = len(name)
        if n > 1:  # several words: find the sequence (or the words run together)
            count, i, kept = 0, 0, []
            while i < len(tokens):
                if tokens[i : i + n] == name:
                    count, i = count + 1, i + n
                elif tokens[i] == "".join(name):
                    count, i = count + 1, i + 1
                else:
                    kept.append(tokens[i])
                    i += 1
            tokens = kept  # matched words no longer count for shorter names
            found[topic] = count
    counts = Counter(tokens)
    for topic in topics:
        name = words(topic)
        if len(name) <= 1:
            found[topic] = counts[name[0]] if name else 0
    return {t: found[t] for t in topics}
