"""Related notes (issue 44): the block toolwire owns, the links it writes and the ranking
from embeddings, links and topics. Pure functions; the real run is in
tests/local/test_related_notes_runs.py."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from toolwire.librarian.notes.owned_block import block_span, set_block, strip_blocks
from toolwire.librarian.notes.workspace import parse_note
from toolwire.librarian.reorganize.duplicates import find_duplicates
from toolwire.librarian.reorganize.index import one_line
from toolwire.librarian.reorganize.link_text import LinkNamer, vault_link_style
from toolwire.librarian.reorganize.related import rank_related
from toolwire.spec.model import IndexNotes

pytestmark = pytest.mark.unit

BLOCK = "<!-- toolwire:related -->\n**Related notes**\n- [[a]]\n<!-- /toolwire:related -->\n"


@pytest.mark.parametrize(
    ("text", "nl"),
    [
        ("# Title\n\nBody text.\n", "\n"),
        ("# Title\r\n\r\nBody text.\r\n", "\r\n"),
        ("Body without a final newline", "\n"),
        ("", "\n"),
        ("Body\n\n", "\n"),
    ],
)
def test_a_block_added_then_removed_leaves_the_user_text(text: str, nl: str) -> None:
    added = set_block(text, "related", "**Related notes**\n- [[a]]", nl)
    assert block_span(added, "related") is not None
    assert strip_blocks(added).rstrip() == text.rstrip()
    removed = set_block(added, "related", "", nl)
    assert removed.rstrip() == text.rstrip()
    if text.endswith(nl):  # a note that ended its last line gets its exact bytes back
        assert removed == text


def test_a_block_is_replaced_where_it_stands_and_text_around_it_kept() -> None:
    text = "Intro.\n\n" + BLOCK + "\nThe user wrote below it.\n"
    new = set_block(text, "related", "**Related notes**\n- [[b]]")
    assert new == text.replace("[[a]]", "[[b]]")
    assert set_block(new, "related", "**Related notes**\n- [[b]]") == new  # idempotent


def test_text_that_only_looks_like_a_marker_is_the_users() -> None:
    text = "Write `<!-- toolwire:related -->` to mark it.\n"
    assert strip_blocks(text) == text and block_span(text, "related") is None


@pytest.mark.parametrize(
    ("from_path", "path", "title", "wiki", "markdown"),
    [
        ("a.md", "cooking/Bread.md", "Bread", "[[Bread]]", "[Bread](cooking/Bread.md)"),
        ("x/a.md", "y/My note.md", "Notes", "[[My note|Notes]]", "[Notes](../y/My%20note.md)"),
        # the same file name twice in the vault: the path tells them apart
        ("a.md", "two/same.md", "", "[[two/same]]", "[same](two/same.md)"),
        # a title that would break the link is left out
        ("a.md", "b.md", "A|B [x]", "[[b]]", "[A|B (x)](b.md)"),
    ],
)
def test_links_resolve_by_obsidian_rules(
    from_path: str, path: str, title: str, wiki: str, markdown: str
) -> None:
    namer = LinkNamer(["a.md", "x/a.md", "cooking/Bread.md", "y/My note.md", "one/same.md",
                       "two/same.md", "b.md"])  # fmt: skip
    assert namer.wikilink(path, title) == wiki
    assert namer.markdown_link(from_path, path, title) == markdown


def test_the_vault_style_is_what_most_links_use() -> None:
    assert vault_link_style(3, 2) == "wikilink"
    assert vault_link_style(0, 0) == "wikilink"
    assert vault_link_style(1, 5) == "markdown"


def test_links_and_topics_move_a_note_up_the_ranking() -> None:
    # Note 0's nearest by cosine is 1, then 2; note 2 links to 0 (a backlink) and both
    # link to the rare note 3: the evidence ranks 2 first. Note 0 links to 3 already:
    # never suggested.
    vectors = np.array([[1.0, 0.0], [0.99, 0.14], [0.97, 0.24], [0.9, 0.44]])
    links = [{3}, set(), {0, 3}, set()]
    topics = ["cooking", None, "cooking", None]
    plain = rank_related(vectors, links, topics, k=2, min_score=0.0, evidence=False)
    ranked = rank_related(vectors, links, topics, k=2, min_score=0.0)
    assert [j for j, _ in plain[0]] == [1, 2]
    assert [j for j, _ in ranked[0]] == [2, 1]
    assert all(j != 3 for j, _ in ranked[0])
    assert all(j != 0 for j, _ in ranked[2])  # 2 links to 0: not suggested either
    # min_score drops the weak ones; no note is related to itself
    assert rank_related(vectors, links, topics, k=3, min_score=2.0) == [[], [], [], []]
    assert all(j != i for i, row in enumerate(ranked) for j, _ in row)


@pytest.mark.parametrize("folder", ["../out", "a/../b", "", "two\nlines", "a\\b"])
def test_an_index_folder_outside_the_workspace_is_refused(folder: str) -> None:
    with pytest.raises(ValidationError):
        IndexNotes(folder=folder)
    assert IndexNotes(folder="/Maps of content/").folder == "Maps of content"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("# Bread\n\nFeed the starter.\nMore.\n", "Feed the starter."),
        ("- first item\n", "first item"),
        ("```\ncode\n```\n", "code"),
        ("# Bread\n", ""),
        ("word " * 40, ("word " * 20).strip() + "…"),
    ],
)
def test_an_index_line_is_the_first_line_of_prose(body: str, line: str) -> None:
    note, _ = parse_note("Bread.md", body.encode())
    assert one_line(note) == line


ORIGINAL = (
    "Closures capture variables from the enclosing scope by reference, by mutable "
    "reference or by value, whichever the body needs. A closure that moves a value "
    "out of its environment can be called only once."
)


@pytest.mark.parametrize(
    ("copy", "duplicate"),
    [
        (ORIGINAL + " Appended: see the chapter on iterators.", True),  # appended
        (ORIGINAL[:120], True),  # truncated
        (ORIGINAL.replace(". ", ".\n"), True),  # reformatted
        # same subject, written apart: a near-miss
        ("Iterators in Rust are lazy: adapters such as map and filter do nothing until "
         "a consumer like collect or sum drives them, one item at a time.", False),
    ],
)  # fmt: skip
def test_a_copy_is_a_duplicate_and_a_note_on_the_same_subject_is_not(
    copy: str, duplicate: bool
) -> None:
    vectors = np.array([[1.0, 0.0], [0.99, 0.1]])  # both close in meaning
    found = find_duplicates(vectors, [ORIGINAL, copy])
    assert bool(found) is duplicate
    far = np.array([[1.0, 0.0], [0.0, 1.0]])  # the words alone never decide
    assert find_duplicates(far, [ORIGINAL, ORIGINAL]) == []
