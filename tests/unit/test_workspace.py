"""Notes workspace: note format vectors, loading rules, safe paths, the sample workspace."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

from toolwire.errors import PathOutsideWorkspace, WorkspaceError
from toolwire.librarian.notes.workspace import (
    Workspace,
    extract_links,
    normalize_rel_path,
    parse_note,
    sha256_hex,
    split_front_matter,
    strip_links,
)

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "workspace" / "parse"
NOTES = Path(__file__).resolve().parents[2] / "data" / "notes"
VECTORS = sorted(p.stem for p in DATA.glob("*.md"))


def make_ws(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return root


# ---------------------------------------------------------------- note format vectors


def test_there_are_vectors() -> None:
    assert len(VECTORS) >= 12


@pytest.mark.parametrize("name", VECTORS)
def test_parse_note_vector(name: str) -> None:
    raw = (DATA / f"{name}.md").read_bytes()
    expected = json.loads((DATA / f"{name}.json").read_text("utf-8"))
    note, warning = parse_note(f"{name}.md", raw)
    assert note.note_id == expected["note_id"]
    assert note.path == f"{name}.md"
    assert note.title == expected["title"]
    assert list(note.tags) == expected["tags"]
    assert note.topic == expected["topic"]
    assert list(note.links) == expected["links"]
    assert list(note.front_matter) == expected["front_matter_keys"]
    assert note.body.startswith(expected["body_starts"])
    assert note.raw == raw
    assert note.sha256 == sha256_hex(raw)
    if expected["warning"] is None:
        assert warning is None
    else:
        assert warning is not None and expected["warning"] in warning


@pytest.mark.parametrize("name", VECTORS)
def test_split_front_matter_is_lossless(name: str) -> None:
    text = (DATA / f"{name}.md").read_bytes().decode("utf-8")
    fm = split_front_matter(text)
    assert fm.bom + fm.block + fm.body == text


def test_strip_links_removes_links_but_not_code() -> None:
    body = "See [[a|A]] and [b](b.md) now.\n```\n[[keep]] [k](k.md)\n```\n`[[inline]]`\n"
    assert strip_links(body) == "See  and  now.\n```\n[[keep]] [k](k.md)\n```\n`[[inline]]`\n"


def test_extract_links_ignores_tilde_fence_until_closed() -> None:
    body = "~~~~\n[[in]]\n~~~\n[[still-in]]\n~~~~\n[[out]]\n"
    assert extract_links(body) == ("out",)


# ---------------------------------------------------------------- loading


def test_load_reads_ids_titles_and_sorts_by_path(tmp_path: Path) -> None:
    make_ws(
        tmp_path,
        {
            "b/second.md": "# Second\n",
            "a.md": "---\nid: first\ntitle: First\n---\nx\n",
            "b/notes.txt": "not a note",
        },
    )
    ws = Workspace.load(tmp_path)
    assert ws.root == tmp_path.resolve()
    assert list(ws.notes) == ["first", "b/second"]
    assert [n.path for n in ws.notes.values()] == ["a.md", "b/second.md"]
    assert ws.notes["b/second"].title == "Second"
    assert ws.warnings == []


def test_duplicate_front_matter_ids_fall_back_to_the_path_id(tmp_path: Path) -> None:
    make_ws(tmp_path, {"x.md": "---\nid: same\n---\n", "y/z.md": "---\nid: same\n---\n"})
    ws = Workspace.load(tmp_path)  # issue 30 item 4: one clash never stops the run
    assert {n.path: nid for nid, n in ws.notes.items()} == {"x.md": "same", "y/z.md": "y/z"}
    assert len(ws.warnings) == 1 and "y/z.md" in ws.warnings[0] and "x.md" in ws.warnings[0]


def test_front_matter_id_may_not_shadow_another_notes_path_id(tmp_path: Path) -> None:
    make_ws(tmp_path, {"a/b.md": "x\n", "other.md": "---\nid: a/b\n---\n"})
    ws = Workspace.load(tmp_path)
    assert ws.notes["a/b"].path == "a/b.md" and ws.notes["other"].path == "other.md"
    assert "already used by a/b.md" in ws.warnings[0]


def test_a_clashing_id_whose_path_id_is_taken_too_is_skipped(tmp_path: Path) -> None:
    make_ws(
        tmp_path,
        {"0.md": "---\nid: b\n---\n", "a.md": "x\n", "b.md": "---\nid: a\n---\n"},
    )
    ws = Workspace.load(tmp_path)
    assert {nid: n.path for nid, n in ws.notes.items()} == {"b": "0.md", "a": "a.md"}
    assert any(w.startswith("skipped b.md") for w in ws.warnings)


def test_load_requires_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace.load(tmp_path / "file.md")
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace.load(tmp_path / "missing")


def test_load_skips_hidden_dirs_and_files(tmp_path: Path) -> None:
    make_ws(
        tmp_path,
        {
            ".git/x.md": "x",
            ".toolwire/journal/r/x.md": "x",
            ".obsidian/y.md": "y",
            "sub/.draft.md": "d",
            "ok.md": "ok",
        },
    )
    assert list(Workspace.load(tmp_path).notes) == ["ok"]


def test_load_skips_invalid_utf8_with_warning(tmp_path: Path) -> None:
    make_ws(tmp_path, {"bad.md": b"caf\xe9 latin-1\n", "good.md": "fine"})
    ws = Workspace.load(tmp_path)
    assert list(ws.notes) == ["good"]
    assert any("bad.md" in w and "UTF-8" in w for w in ws.warnings)


def test_load_bad_yaml_is_a_warning_and_the_file_is_body(tmp_path: Path) -> None:
    make_ws(tmp_path, {"n.md": "---\ntitle: [x\n---\n# Kept\n"})
    ws = Workspace.load(tmp_path)
    note = ws.notes["n"]
    assert note.title == "Kept" and note.front_matter == {} and note.body.startswith("---")
    assert any("n.md" in w and "YAML" in w for w in ws.warnings)


def test_load_skips_symlinks_out_of_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make_ws(outside, {"secret.md": "secret", "dir/inner.md": "inner"})
    root = make_ws(tmp_path / "ws", {"real.md": "# Real\n"})
    (root / "link-out.md").symlink_to(outside / "secret.md")
    (root / "dir-out").symlink_to(outside / "dir", target_is_directory=True)
    (root / "link-in.md").symlink_to(root / "real.md")
    ws = Workspace.load(root)
    # a link to another note is that note, read once (never a second note, never written)
    assert sorted(ws.notes) == ["real"]
    assert any("link-in.md" in w and "the note real.md, read there" in w for w in ws.warnings)
    assert any("link-out.md" in w and "outside" in w for w in ws.warnings)
    assert any("dir-out" in w and "symlinked folder" in w for w in ws.warnings)


def test_load_skips_links_into_hidden_folders(attack_ws: Workspace) -> None:
    assert "sneaky" not in attack_ws.notes
    assert any("sneaky.md" in w and "hidden folder" in w for w in attack_ws.warnings)


def test_load_skips_a_fifo_without_blocking(tmp_path: Path) -> None:
    make_ws(tmp_path, {"ok.md": "ok"})
    os.mkfifo(tmp_path / "pipe.md")
    ws = Workspace.load(tmp_path)
    assert list(ws.notes) == ["ok"]
    assert any("pipe.md" in w and "not a regular file" in w for w in ws.warnings)


def test_find_note_by_id_path_and_path_without_suffix(tmp_path: Path) -> None:
    make_ws(tmp_path, {"t/a.md": "---\nid: alpha\n---\n", "t/b.md": "b"})
    ws = Workspace.load(tmp_path)
    found = [ws.find_note(t) for t in ("alpha", "t/a.md", "t/a", "t/b", "nope")]
    # by id, by path, by path without .md
    assert [(n.note_id, n.path) if n else None for n in found] == [
        ("alpha", "t/a.md"), ("alpha", "t/a.md"), ("alpha", "t/a.md"), ("t/b", "t/b.md"), None,
    ]  # fmt: skip


def test_resolve_link_relative_wiki_and_bare_name(tmp_path: Path) -> None:
    make_ws(
        tmp_path,
        {
            "home/cooking/dal.md": "x",
            "home/cooking/pantry.md": "[[dal]] [d](dal.md) [up](../../tech/pg.md) [[tech/pg]]",
            "tech/pg.md": "---\nid: pg\n---\n",
        },
    )
    ws = Workspace.load(tmp_path)
    pantry = ws.notes["home/cooking/pantry"]
    resolved = [ws.resolve_link(pantry, t) for t in pantry.links]
    assert resolved == ["home/cooking/dal", "home/cooking/dal", "pg", "pg"]
    assert ws.resolve_link(pantry, "missing") is None
    assert ws.resolve_link(pantry, "../../../../escape.md") is None


def test_with_file_is_an_overlay(tmp_path: Path) -> None:
    make_ws(tmp_path, {"a.md": "# A\n"})
    ws = Workspace.load(tmp_path)
    view = ws.with_file("new/b.md", b"# B\n").with_file("a.md", b"# A2\n")
    assert view.notes["new/b"].title == "B" and view.notes["a"].title == "A2"
    assert ws.notes["a"].title == "A" and "new/b" not in ws.notes
    assert not (tmp_path / "new").exists()
    assert view.exists("new/b.md") and not ws.exists("new/b.md")
    with pytest.raises(WorkspaceError, match="would be used by both"):
        view.with_file("c.md", b"---\nid: a\n---\n")


# ---------------------------------------------------------------- safe paths


@pytest.fixture
def attack_ws(tmp_path: Path) -> Workspace:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.md").write_text("outside")
    root = make_ws(tmp_path / "ws", {"Foo.md": "foo", "tech/a.md": "a", "café.md": "nfc"})
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "leak.md").symlink_to(outside / "target.md")
    (root / "dangling").symlink_to(outside / "not-yet")
    os.mkfifo(root / "fifo.md")
    (root / "folder.md").mkdir()
    (root / "loop.md").symlink_to(root / "loop.md")
    (root / ".git").mkdir()
    (root / ".git" / "config.md").write_text("[core]")
    (root / "sneaky").symlink_to(root / ".git", target_is_directory=True)
    (root / "sneaky.md").symlink_to(root / ".git" / "config.md")
    return Workspace.load(root)


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("../x.md", "'..'"),
        ("a/../../x.md", "'..'"),
        ("tech/../x.md", "'..'"),
        ("/etc/passwd", "absolute"),
        ("C:/x.md", "absolute"),
        ("~/x.md", "~"),
        ("a\\..\\x.md", "backslash"),
        ("x\x00.md", "NUL"),
        ("x\n.md", "control"),
        ("", "empty"),
        ("./", "folder"),
        ("tech/", "folder"),
        (".toolwire/x.md", ".toolwire"),
        ("sub/.git/config", ".git"),
        (".GIT/x.md", "reserves"),
        (".hidden/x.md", "hidden"),
        ("escape/target.md", "outside the workspace"),
        ("escape/new/deeper.md", "outside the workspace"),
        ("leak.md", "outside the workspace"),
        ("dangling/x.md", "outside the workspace"),
        ("fifo.md", "special file"),
        ("folder.md", "folder"),
        ("loop.md", "cannot be used"),
        ("tech/a.md/x.md", "cannot be used"),
        ("sneaky/x.md", "hidden or reserved"),
        ("sneaky.md", "hidden or reserved"),
    ],
)
def test_resolve_inside_rejects(attack_ws: Workspace, rel: str, reason: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as err:
        attack_ws.resolve_inside(rel)
    assert reason in err.value.message
    assert err.value.code == "PATH_OUTSIDE_WORKSPACE"


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("tech/a.md", "tech/a.md"),
        ("./tech//new.md", "tech/new.md"),
        ("new/dir/x.md", "new/dir/x.md"),
    ],
)
def test_resolve_inside_accepts(attack_ws: Workspace, rel: str, expected: str) -> None:
    assert attack_ws.resolve_inside(rel) == attack_ws.root / expected
    assert normalize_rel_path(rel) == expected


@pytest.mark.parametrize(
    ("rel", "collides"),
    [
        ("foo.md", True),
        ("FOO.md", True),
        ("foo.MD", True),
        ("Foo.md", False),  # the same path is not a collision (it is TARGET_EXISTS)
        ("Tech/b.md", True),  # folder differs by case
        ("tech/A.md", True),
        ("tech/b.md", False),
        (unicodedata.normalize("NFD", "café.md"), True),
        ("CAFÉ.md", True),
        ("cafe.md", False),
        ("other/new.md", False),
    ],
)
def test_casefold_collision(attack_ws: Workspace, rel: str, collides: bool) -> None:
    assert attack_ws.casefold_collision(rel) is collides


def test_casefold_collision_sees_planned_creates(tmp_path: Path) -> None:
    ws = Workspace.load(make_ws(tmp_path, {"a.md": "a"})).with_file("New/x.md", b"x")
    assert ws.casefold_collision("new/y.md")
    assert ws.casefold_collision("NEW/X.md")
    assert not ws.casefold_collision("New/y.md")


# ---------------------------------------------------------------- the sample workspace


@pytest.fixture(scope="module")
def sample() -> Workspace:
    return Workspace.load(NOTES)


def test_sample_loads_cleanly(sample: Workspace) -> None:
    assert len(sample.notes) >= 22
    assert sample.warnings == []
    taxonomy = {"databases", "networking", "security", "observability"} | {
        "cooking", "travel", "finance", "reading",
    }  # fmt: skip
    topics = {n.topic for n in sample.notes.values() if n.topic}
    assert topics <= taxonomy and len(topics) >= 6
    assert {p.split("/")[0] for p in (n.path for n in sample.notes.values())} >= {"tech", "home"}


def test_sample_has_one_large_note_and_small_others(sample: Workspace) -> None:
    sizes = {n.path: len(n.raw) for n in sample.notes.values()}
    large = [p for p, s in sizes.items() if s > 40 * 1024]
    assert large == ["tech/databases/postgres-tuning-guide.md"]
    assert sizes[large[0]] < 60 * 1024
    for note in sample.notes.values():
        if note.path not in large:
            assert 80 <= len(note.raw.decode("utf-8").split()) <= 400, note.path


def test_sample_traits(sample: Workspace) -> None:
    notes = sample.notes
    bodies = {n.note_id: n.body for n in notes.values()}
    injection = bodies["prompt-injection-notes"]
    for marker in ("</body_markdown>", "<operation>", "<librarian_response>"):
        assert marker in injection
    # in prose as well as in a fenced code block
    prose = injection.split("```")[0]
    assert "</body_markdown>" in prose and "<librarian_response>" in prose
    assert any("{{request_id}}" in b for b in bodies.values())
    assert "databases" in notes["home/cooking/sourdough-starter"].tags  # mis-tagged on purpose
    untitled = [n.note_id for n in notes.values() if not n.title]
    assert len(untitled) >= 3
    with_fm = [n for n in notes.values() if n.front_matter]
    assert 5 <= len(with_fm) < len(notes)
    assert any(n.front_matter.get("id") for n in with_fm)
    assert b"\r\n" in notes["home/finance/tax-checklist"].raw
    assert sum(len(n.links) for n in notes.values()) >= 15


def test_sample_near_duplicates_share_most_lines(sample: Workspace) -> None:
    a = set(sample.notes["prometheus-alerting"].body.splitlines())
    b = set(sample.notes["inbox/alerting-rules-draft"].body.splitlines())
    assert len(a & b) >= 8


def test_sample_relative_links_resolve(sample: Workspace) -> None:
    dangling = []
    for note in sample.notes.values():
        for target in note.links:
            if sample.resolve_link(note, target) is None:
                dangling.append((note.path, target))
    # exactly one dangling link is kept on purpose (a book not read yet)
    assert dangling == [("home/reading/reading-list-2024.md", "thinking-fast-and-slow")]
