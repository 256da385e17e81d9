"""Reading and editing a vault as its owner wrote it (issue 28 item 3).

Tags in every form (front matter list, flow list, string with commas or spaces,
inline ``#tags``, nested ``a/b``), values as typed (``title: no`` is the text
"no"), which files are notes (include/exclude globs), and retags and retitles
that keep each form. Behaviour pinned here is what README's "How the librarian
reads a vault" says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwire.domain import Operation
from toolwire.errors import SpecError
from toolwire.librarian.notes.changes import ChangeRejected, render_change
from toolwire.librarian.notes.files import NoteFiles
from toolwire.librarian.notes.frontmatter_load import load_front_matter
from toolwire.librarian.notes.tags import carried_topic, front_matter_tags, inline_tags
from toolwire.librarian.notes.workspace import Workspace, parse_note
from toolwire.librarian.summary import current_topic
from toolwire.spec.model import NoteConventions, NotesSpec, load_spec_text

pytestmark = pytest.mark.unit

TAXONOMY = ("cooking", "finance", "databases", "travel")

# These tests pin how edits are made in a vault that keeps toolwire's own ways (a
# ``title:`` and a ``topic:`` property, flow lists), stated as a spec states them;
# the conventions read from a vault are pinned in test_conventions.py.
TOOLWIRE_STYLE = NotesSpec(
    conventions=NoteConventions(title="property", topic_property=True, list_style="flow")
)


# ---------------------------------------------------------------- tags as read


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        ("Plain #finance and #a/b here.\n", ["finance", "a/b"]),
        ("#start of a line, then (#paren) and x#mid\n", ["start"]),
        ("# Heading\n## Sub #tagged\n", ["tagged"]),
        ("`#code` and\n```\n#fenced\n```\nafter #ok\n", ["ok"]),
        ("~~~\n#fenced\n", []),  # an unclosed fence runs to the end
        ("[[Note#Heading]] [x](#anchor) https://e.com/#frag <a href='#x'>\n", []),
        ("#2024 is a number, #2024-05 is not only digits, #v2 ok\n", ["2024-05", "v2"]),
        ("Unicode #café #日本 and #trailing/ slash\n", ["café", "日本", "trailing"]),
    ],
)
def test_inline_tags_are_read_from_prose_only(body: str, tags: list[str]) -> None:
    assert inline_tags(body) == tags


@pytest.mark.parametrize(
    ("value", "tags"),
    [
        ("finance investing", ["finance", "investing"]),
        ("finance, investing", ["finance", "investing"]),
        ("#finance,  #a/b ,", ["finance", "a/b"]),
        (["finance", "a/b", "#c", 12, "v2", True, None, ["x"]], ["finance", "a/b", "c", "v2"]),
        (None, []),
        ({"a": 1}, []),
    ],
)
def test_front_matter_tags_in_every_form(value: object, tags: list[str]) -> None:
    assert front_matter_tags(value) == tags


def test_a_nested_or_inline_tag_carries_its_topic_so_the_note_is_already_tagged() -> None:
    nested, _ = parse_note("a.md", b"---\ntags: [Cooking/Bread]\n---\nDough.\n")
    inline, _ = parse_note("b.md", b"Budget review. #finance\n")
    string, _ = parse_note("c.md", b"---\ntags: finance investing\n---\nFunds.\n")
    untagged, _ = parse_note("d.md", b"Nothing here #idea\n")
    assert [current_topic(n, TAXONOMY) for n in (nested, inline, string, untagged)] == [
        "cooking",
        "finance",
        "finance",
        None,
    ]
    assert nested.tags == ("Cooking/Bread",) and inline.inline_tags == ("finance",)
    assert carried_topic("travel", ("finance",), TAXONOMY) == "travel"  # topic field first


def test_front_matter_values_stay_as_typed() -> None:
    data = load_front_matter("title: no\nid: 007\nv: 1.10\nd: 2024-05-01\non: yes\nb: true\n")
    assert data == {"title": "no", "id": "007", "v": "1.10", "d": "2024-05-01", "on": "yes"} | {
        "b": True
    }
    note, _ = parse_note("n.md", b"---\ntitle: no\n---\n# Heading\n")
    assert note.title == "no"
    not_text, _ = parse_note("m.md", b"---\ntitle: true\n---\n# Heading\n")
    assert not_text.title == "Heading"  # a boolean is not a title


# ---------------------------------------------------------------- which files are notes


@pytest.mark.parametrize(
    ("rel", "note"),
    [
        ("Notes/idea.md", True),
        ("Templates/Recipe.md", False),
        ("deep/templates/x.md", False),
        ("Daily/anything.md", False),
        ("Daily Notes/x.md", False),
        ("journal/2024-05-01.md", False),
        ("2024-05-01 trip.md", True),  # only a bare date is a daily note
        ("Drawings/Kitchen.excalidraw.md", False),
        ("attachments/ocr.md", False),
        ("notes.txt", False),
    ],
)
def test_default_globs_skip_templates_daily_notes_drawings_attachments(
    rel: str, note: bool
) -> None:
    assert NoteFiles().is_note(rel) is note


def test_spec_globs_replace_the_defaults(tmp_path: Path) -> None:
    for rel in ("Inbox/a.md", "Archive/b.md", "Templates/c.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n", encoding="utf-8")
    notes = NotesSpec(include=["Inbox/", "Templates/"], exclude=["Archive/"])
    assert sorted(Workspace.load(tmp_path, notes).notes) == ["Inbox/a", "Templates/c"]
    assert sorted(Workspace.load(tmp_path).notes) == ["Archive/b", "Inbox/a"]


# ---------------------------------------------------------------- edits keep the form


def _edit(tmp_path: Path, text: str, kind: str, body: str = "-", title: str = "T") -> str:
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    op = Operation("op_1", kind, "n", None, title, body, "r", 0.9)
    change = render_change(Workspace.load(tmp_path, TOOLWIRE_STYLE), op, TAXONOMY)
    assert change is not None
    return change.new.decode("utf-8")


@pytest.mark.parametrize(
    ("before", "topic", "after"),
    [
        # a space-separated string stays one: never "finance, finance investing"
        ("tags: finance investing\n", "cooking", "tags: cooking investing\ntopic: cooking\n"),
        ("tags: travel, checklist\n", "cooking", "tags: cooking, checklist\ntopic: cooking\n"),
        ("tags: investing\n", "finance", "tags: finance investing\ntopic: finance\n"),
        ('tags: "investing"\n', "finance", 'tags: "finance investing"\ntopic: finance\n'),
        # a nested tag stays; the new topic is not put beside its own nested tag
        ("tags: [finance/2024]\n", "cooking", "tags: [cooking, finance/2024]\ntopic: cooking\n"),
        ("tags: [cooking/bread]\n", "cooking", "tags: [cooking/bread]\n"),
        (
            "tags:\n- a  # mine\n- finance\n",
            "travel",
            "tags:\n- a  # mine\n- travel\ntopic: travel\n",
        ),
        ("tags:\n", "travel", "tags: [travel]\ntopic: travel\n"),
    ],
)
def test_a_retag_edits_tags_in_the_form_they_were_written(
    tmp_path: Path, before: str, topic: str, after: str
) -> None:
    out = _edit(tmp_path, f"---\n{before}---\nBody.\n", "retag_note", topic)
    assert out == f"---\n{after}---\nBody.\n"


def test_a_retag_of_an_inline_tag_edits_it_inline_and_leaves_code_alone(tmp_path: Path) -> None:
    text = "Money plan #finance, see `#finance` and #finance/2024.\n"
    out = _edit(tmp_path, text, "retag_note", "cooking")
    assert out == "Money plan #cooking, see `#finance` and #finance/2024.\n"
    kept = "Already #cooking today.\n"
    assert _edit(tmp_path, kept, "retag_note", "cooking") == kept


def test_a_retitle_sets_the_title_field_and_heading_never_the_file_name_or_links(
    tmp_path: Path,
) -> None:
    (tmp_path / "other.md").write_text("See [[n]] and [n](n.md).\n", encoding="utf-8")
    out = _edit(tmp_path, "# Old title\n\nText.\n", "retitle_note", title="New title")
    assert out == "---\ntitle: New title\n---\n# New title\n\nText.\n"
    assert sorted(p.name for p in tmp_path.glob("*.md")) == ["n.md", "other.md"]
    assert (tmp_path / "other.md").read_text(encoding="utf-8") == "See [[n]] and [n](n.md).\n"


def test_a_retitle_to_a_yaml_word_is_quoted_so_it_stays_text(tmp_path: Path) -> None:
    out = _edit(tmp_path, "---\ntitle: Old # mine\n---\nB\n", "retitle_note", title="no")
    assert out == "---\ntitle: 'no' # mine\n---\nB\n"


def test_nothing_is_created_in_an_excluded_folder(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x\n", encoding="utf-8")
    op = Operation("op_1", "create_note", "", "Templates/new.md", "New", "Body", "r", 0.9)
    with pytest.raises(ChangeRejected) as err:
        render_change(Workspace.load(tmp_path, TOOLWIRE_STYLE), op, TAXONOMY)
    assert err.value.code == "INVALID_PATH" and "excluded" in err.value.message


def test_note_globs_in_the_spec_are_checked_and_defaults_keep_the_hash() -> None:
    base = (
        'name: v\nversion: "1"\ntransport: xml_attrless\nmodel: replay:s.jsonl\n'
        "prompt_pack: p\ntaxonomy:\n  topics: [a]\n"
    )
    spelled = (
        base + "notes:\n  include: ['*.md']\n  exclude: " + json.dumps(list(NotesSpec().exclude))
    )
    assert load_spec_text(spelled).hash == load_spec_text(base).hash
    with pytest.raises(SpecError) as err:
        load_spec_text(base + "notes:\n  exclude: ['../outside/']\n")
    assert "notes.exclude[0]" in str(err.value)
