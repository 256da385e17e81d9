"""Safety round four: a 50 MB note in the workspace does not stall the run.

On the main of 2026-11-26 a vault holding one 50 MB note written as a single paragraph
(log lines, an export without blank lines) spent about 6 minutes (4 of them system time)
between ``build-requests`` and the first embedding: the scorer cut the paragraph into
chunks with ``para = para[size:]`` in a loop, copying the rest of the note at each of its
~44,000 cuts. Cutting at offsets makes it linear (about 0.1 CPU-s for 50 MB).

The timeout below is a hang guard, not a timing assertion: the whole test takes a few
seconds and the old code needed minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.librarian.judge.text import CHUNK_CHARS, HEADINGS_CHARS, MAX_CHUNKS, note_chunks
from toolwire.librarian.notes.workspace import Workspace

LINE = "SQL indexes query tuning analytical engines databases postgres duckdb\n"
SIZE = 50 * 1024 * 1024


@pytest.mark.timeout(180)
def test_a_50_mb_one_paragraph_note_is_read_and_chunked(tmp_path: Path, tally: Tally) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "big.md").write_text("# Big\n" + LINE * (SIZE // len(LINE)), encoding="utf-8")
    (root / "small.md").write_text("# Small\nDNS and TCP\n", encoding="utf-8")

    ws = Workspace.load(root)
    big = ws.notes["big"]
    assert len(big.raw) > SIZE - len(LINE) and sorted(ws.notes) == ["big", "small"]

    chunks = note_chunks(big.title, big.path, big.body)
    assert len(chunks) == MAX_CHUNKS
    assert len(chunks[0]) <= CHUNK_CHARS + HEADINGS_CHARS
    assert all(len(chunk) == CHUNK_CHARS for chunk in chunks[1:-1])
    # evenly spaced through the note: the last chunk is the note's end
    assert big.body.rstrip().endswith(chunks[-1])
    tally.add("surroundings", "note bytes read", len(big.raw))


@pytest.mark.parametrize("length", [0, 1, 5, 6, 7, 12, 13, 3 * 1200, 3 * 1200 + 1])
def test_a_long_paragraph_is_cut_into_whole_chunks_in_order(length: int) -> None:
    body = "".join(chr(ord("a") + i % 26) for i in range(length))
    chunks = note_chunks("", "n.md", body, max_chunks=10_000)
    rest = chunks[0].split("\n", 1)[1] if "\n" in chunks[0] else ""
    assert rest + "".join(chunks[1:]) == body
    assert all(0 < len(c) <= CHUNK_CHARS for c in chunks[1:])
