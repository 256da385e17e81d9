"""The tier's own plumbing: the tally adds up and renders what it counted."""

from __future__ import annotations

from pathlib import Path

from hostile.tally import Tally


def test_tally_adds_renders_and_writes(tmp_path: Path) -> None:
    t = Tally()
    t.add("fuzz: demo", "inputs tried", 3)
    t.add("fuzz: demo", "inputs tried", 4)
    t.add("load: demo", "rows lost", 0)
    t.note("load: demo", "peak RSS 12 MB")
    assert t.rows() == [("fuzz: demo", "inputs tried", 7.0), ("load: demo", "rows lost", 0.0)]
    out = tmp_path / "HOSTILE.md"
    t.write(out, "suite", "passed")
    text = out.read_text()
    assert "| fuzz: demo | inputs tried | 7 |" in text and "peak RSS 12 MB" in text
    assert out.with_suffix(".json").is_file()
