"""The vault's conventions (issue 42): read from its notes, stated by a spec, followed
by every edit. Detection is pinned on small vaults written here; each edit on a
one-note vault whose conventions the spec states (detection on one note is no test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.librarian.answer import file_name_title
from toolwire.librarian.notes.changes import ChangeRejected, render_change
from toolwire.librarian.notes.conventions import Conventions
from toolwire.librarian.notes.workspace import Workspace
from toolwire.spec.model import NoteConventions, NotesSpec

pytestmark = pytest.mark.unit

TAXONOMY = ("cooking", "finance", "travel")

# name -> (files, the conventions read from them)
VAULTS: dict[str, tuple[dict[str, str], Conventions]] = {
    "obsidian help: file names, block lists, no topic": (
        {
            "a.md": "---\naliases:\n  - A\ntags:\n  - x\n---\nText.\n",
            "b.md": "---\ntags:\n  - y\n---\nMore.\n",
            "c.md": "No front matter. #z\n",
        },
        Conventions("file_name", "front_matter", False, "block"),
    ),
    "toolwire's own: title and topic properties, flow lists": (
        {
            "a.md": "---\ntitle: A\ntags: [x]\ntopic: cooking\n---\nText.\n",
            "b.md": "---\ntitle: B\ntags: [y, z]\ntopic: travel\n---\nMore.\n",
            "c.md": "Untitled.\n",
        },
        Conventions("property", "front_matter", True, "flow"),
    ),
    "headings and inline tags": (
        {
            "a.md": "# A\n\nText #x.\n",
            "b.md": "\n# B\n\nMore #y.\n",
            "c.md": "---\ntags: z\n---\nNo heading.\n",
        },
        Conventions("h1", "inline", False, "string"),
    ),
    "a topic property alone; other lists in flow": (
        {
            "a.md": "---\ntopic: cooking\naliases: [A]\n---\nText.\n",
            "b.md": "---\ntopic: travel\n---\nMore.\n",
        },
        Conventions("file_name", "none", True, "flow"),
    ),
    "an empty vault": ({}, Conventions("file_name", "front_matter", False, "flow")),
}


def _vault(root: Path, files: dict[str, str]) -> None:
    root.mkdir(exist_ok=True)
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")


@pytest.mark.parametrize("name", list(VAULTS))
def test_conventions_are_read_from_the_vault(tmp_path: Path, name: str) -> None:
    files, expected = VAULTS[name]
    _vault(tmp_path, files)
    assert Workspace.load(tmp_path).conventions == expected


def test_what_a_spec_states_wins_over_what_was_read(tmp_path: Path) -> None:
    _vault(tmp_path, VAULTS["obsidian help: file names, block lists, no topic"][0])
    stated = NotesSpec(conventions=NoteConventions(title="h1", list_style="flow"))
    assert Workspace.load(tmp_path, stated).conventions == Conventions(
        "h1", "front_matter", False, "flow"
    )


def _edit(tmp_path: Path, text: str, op: Operation, **conventions: object) -> str:
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    spec = NotesSpec(conventions=NoteConventions.model_validate(conventions))
    change = render_change(Workspace.load(tmp_path, spec), op, TAXONOMY)
    assert change is not None
    return change.new.decode("utf-8")


def _retag(topic: str) -> Operation:
    return Operation("op_1", "retag_note", "n", None, "-", topic, "r", 0.9)


def _retitle(title: str) -> Operation:
    return Operation("op_1", "retitle_note", "n", None, title, "-", "r", 0.9)


B = dict(title="file_name", tags="front_matter", topic_property=False)

# (before, topic, conventions, after): the topic goes where and how the vault puts it.
RETAGS = [
    ("Body.\n", "cooking", B | {"list_style": "block"}, "---\ntags:\n  - cooking\n---\nBody.\n"),
    ("Body.\n", "cooking", B | {"list_style": "flow"}, "---\ntags: [cooking]\n---\nBody.\n"),
    ("Body.\n", "cooking", B | {"list_style": "string"}, "---\ntags: cooking\n---\nBody.\n"),
    (
        "---\naliases:\n  - N\n---\nBody.\n",
        "cooking",
        B | {"list_style": "block"},
        "---\naliases:\n  - N\ntags:\n  - cooking\n---\nBody.\n",
    ),
    (
        "---\ntags:\n---\nBody.\n",
        "travel",
        B | {"list_style": "block"},
        "---\ntags:\n  - travel\n---\nBody.\n",
    ),
    # no second property: the topic is a tag only
    ("---\ntags:\n  - x\n---\nB\n", "cooking", B, "---\ntags:\n  - cooking\n  - x\n---\nB\n"),
    # a topic property where the vault keeps one
    (
        "---\ntags: [x]\n---\nB\n",
        "cooking",
        B | {"topic_property": True},
        "---\ntags: [cooking, x]\ntopic: cooking\n---\nB\n",
    ),
    # an inline vault: one line of tags at the end, every byte before it kept
    ("Text #x.\n", "cooking", B | {"tags": "inline"}, "Text #x.\n\n#cooking\n"),
    ("Text", "cooking", B | {"tags": "inline"}, "Text\n\n#cooking\n"),
    # a property-only vault: the topic property, no tag
    (
        "Text.\n",
        "travel",
        B | {"tags": "none", "topic_property": True},
        "---\ntopic: travel\n---\nText.\n",
    ),
]


@pytest.mark.parametrize(("before", "topic", "conventions", "after"), RETAGS)
def test_a_retag_writes_the_topic_as_the_vault_does(
    tmp_path: Path, before: str, topic: str, conventions: dict[str, object], after: str
) -> None:
    assert _edit(tmp_path, before, _retag(topic), **conventions) == after


def test_a_retitle_goes_where_the_vault_keeps_titles(tmp_path: Path) -> None:
    h1 = {"title": "h1"}
    assert _edit(tmp_path, "# Old\n\nText.\n", _retitle("New"), **h1) == "# New\n\nText.\n"
    assert _edit(tmp_path, "Text.\n", _retitle("New"), **h1) == "# New\n\nText.\n"
    prop = {"title": "property"}
    assert _edit(tmp_path, "Text.\n", _retitle("New"), **prop) == "---\ntitle: New\n---\nText.\n"
    # A note that keeps a title property itself gets it, whatever the vault does.
    own = "---\ntitle: Old\n---\nText.\n"
    assert _edit(tmp_path, own, _retitle("New"), title="file_name") == (
        "---\ntitle: New\n---\nText.\n"
    )
    with pytest.raises(ChangeRejected) as err:
        _edit(tmp_path, "Text.\n", _retitle("New"), title="file_name")
    assert err.value.code == "TITLE_IS_FILE_NAME" and "notes.conventions.title" in err.value.message


def test_a_rewrite_adds_no_title_property_where_the_vault_has_none(tmp_path: Path) -> None:
    op = Operation("op_1", "rewrite_note", "n", None, "A title", "New text.", "r", 0.9)
    assert _edit(tmp_path, "Old text.\n", op, title="file_name") == "New text.\n"
    assert _edit(tmp_path, "Old text.\n", op, title="property") == (
        "---\ntitle: A title\n---\nNew text.\n"
    )


CREATED = [
    ("property", "---\ntitle: New\n---\nBody.\n"),
    ("h1", "# New\n\nBody.\n"),
    ("file_name", "Body.\n"),  # the path names it
]


@pytest.mark.parametrize(("title", "written"), CREATED)
def test_a_created_note_carries_its_title_where_the_vault_keeps_titles(
    tmp_path: Path, title: str, written: str
) -> None:
    (tmp_path / "n.md").write_text("x\n", encoding="utf-8")
    op = Operation("op_1", "create_note", "", "new.md", "New", "Body.", "r", 0.9)
    spec = NotesSpec(conventions=NoteConventions.model_validate({"title": title}))
    change = render_change(Workspace.load(tmp_path, spec), op, TAXONOMY)
    assert change is not None and change.old is None
    assert change.new.decode("utf-8") == written


@pytest.mark.parametrize(
    ("path", "text", "title"),
    [
        ("tech/wireguard-tunnel.md", "A WireGuard tunnel between two peers.", "Wireguard tunnel"),
        ("Sales tax.md", "In some jurisdictions the sales tax is added at the till.", "Sales tax"),
        # A name the note does not bear out is no title: the note stays untitled.
        ("Untitled 3.md", "Flour, water, salt.", ""),
        ("2024-05-01.md", "Baked bread.", ""),
    ],
)
def test_a_title_from_the_file_name_is_checked_against_the_note(
    path: str, text: str, title: str
) -> None:
    assert file_name_title(path, text) == title


def test_a_retitle_in_a_heading_vault_replaces_the_leading_heading_whatever_it_says(
    tmp_path: Path,
) -> None:
    # The heading is the title even when the note's read title differs (closing #s, markup).
    text = "# Old `code` title ##\n\nText.\n"
    assert _edit(tmp_path, text, _retitle("New"), title="h1") == "# New ##\n\nText.\n"
