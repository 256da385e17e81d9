"""Safety round four: odd names and odd contents around real notes, through a replayed run.

A vault holding names with spaces, ``#``, ``[[``, leading dashes, a 255-byte name,
case-only twins, a folder named ``x.md``, a fifo ``y.md``, links broken, looping and
leading out, a name that is not UTF-8 and one with a newline, beside notes that are
empty, only front matter, BOM-led, CRLF and UTF-16. Pinned: every note is read once,
every file that is not a note is named in one warning line (UTF-16 as UTF-16, not as
"byte 0"), a run retagging every note applies them all keeping BOM and line endings,
never touches a trap, and ``toolwire undo`` gives every byte back.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from replay_spec import replay_spec, retag_answer

from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.journal.write_ahead import undo_run
from toolwire.librarian.notes.workspace import Workspace

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
LONG = "n" * 252 + ".md"  # 255 bytes
NOTES = {
    "with space.md": b"# Spaced\nSQL\n",
    "hash#tag.md": b"# Hash\nSQL\n",
    "wiki[[x.md": b"# Wiki\nSQL\n",
    "-rf.md": b"# Dash\nSQL\n",
    "--help.md": b"# Help\nSQL\n",
    LONG: b"# Long\nSQL\n",
    "Case.md": b"# Upper\nSQL\n",
    "case.md": b"# Lower\nSQL\n",
    "x.md/inner.md": b"# Inner\nSQL\n",
    "empty.md": b"",
    "only-fm.md": b"---\ntitle: Only front matter\n---\n",
    "bom.md": "\ufeff# Bom\nSQL\n".encode(),
    "crlf.md": b"---\r\ntitle: CRLF\r\n---\r\nSQL\r\n",
}
UTF16 = "# UTF16\nSQL\n".encode("utf-16")


def _vault(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "vault", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_bytes(b"# Secret\n")
    for rel, data in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "utf16.md").write_bytes(UTF16)
    os.mkfifo(root / "y.md")
    os.symlink("nowhere.md", root / "broken.md")
    os.symlink("loop2.md", root / "loop1.md")
    os.symlink("loop1.md", root / "loop2.md")
    os.symlink(outside / "secret.md", root / "out.md")
    (root / os.fsdecode(b"bad\xff.md")).write_bytes(b"# Bad name\n")
    (root / "new\nline.md").write_bytes(b"# Newline\n")
    return root, outside


def _tree(root: Path) -> dict[str, object]:
    """Every entry but .toolwire: bytes of files, link texts, kinds of the rest."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = os.fsencode(path.relative_to(root))
        if rel.startswith(b".toolwire"):
            continue
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            out[rel.decode("utf-8", "replace")] = ("link", os.readlink(path))
        elif stat.S_ISREG(mode):
            out[rel.decode("utf-8", "replace")] = path.read_bytes()
        else:
            out[rel.decode("utf-8", "replace")] = stat.S_IFMT(mode)
    return out


def _spec(tmp: Path, note_ids: list[str]) -> Path:
    return replay_spec(tmp, retag_answer(note_ids), name="surroundings-names", batch=50)


def test_every_note_read_once_and_every_other_file_named(tmp_path: Path) -> None:
    root, _ = _vault(tmp_path)
    ws = Workspace.load(root)
    assert sorted(n.path for n in ws.notes.values()) == sorted(NOTES)
    said = "\n".join(ws.warnings)
    for line in (
        "skipped utf16.md: UTF-16 text (a byte order mark); toolwire reads UTF-8 notes",
        "skipped y.md: not a regular file",
        "skipped broken.md: a symlink to a file that does not exist",
        "skipped loop1.md: loop1.md is a loop of symbolic links",
        "skipped out.md: out.md is a symlink to",
        "skipped 'bad\\udcff.md': file name is not valid UTF-8",
        "skipped 'new\\nline.md': path 'new\\nline.md' contains a control or bidi character",
    ):
        assert line in said
    assert len(ws.warnings) == 8  # loop2.md too; nothing else


@pytest.mark.timeout(300)
def test_a_run_retagging_every_note_applies_all_and_undo_gives_every_byte_back(
    tmp_path: Path,
) -> None:
    root, outside = _vault(tmp_path)
    before, outside_before = _tree(root), _tree(outside)
    ids = [n.note_id for n in Workspace.load(root).notes.values()]
    ctx = prepare_run(_spec(tmp_path, ids), workspace=root, db=tmp_path / "store.duckdb")
    result = run_librarian(ctx)

    assert result.status == "ok", result.error_message
    assert {o.path: o.status for o in result.outcomes} == dict.fromkeys(NOTES, "applied")
    after = _tree(root)
    for rel in NOTES:
        data = after[rel]
        assert isinstance(data, bytes) and b"databases" in data.split(b"---")[1], rel
    bom, crlf = after["bom.md"], after["crlf.md"]
    assert isinstance(bom, bytes) and bom.startswith("\ufeff---\n".encode())
    assert isinstance(crlf, bytes) and b"tags: [databases]\r\n" in crlf
    assert {k: v for k, v in after.items() if k not in NOTES} == {
        k: v for k, v in before.items() if k not in NOTES
    }  # every trap as it was
    assert _tree(outside) == outside_before

    undo_run(root, result.run_id)
    assert _tree(root) == before
