"""Links found by the markdown parser: data-driven vectors in tests/data/links.

Each ``NAME.md`` is a note body; ``NAME.json`` holds what the workspace reads from it:
``links`` (note links, ``Note.links``), ``targets`` (every link target as written,
what ``RELINK_EXTERNAL_LINK`` compares) and ``stripped`` (the body without its
links and reference definitions, what ``RELINK_CHANGES_TEXT`` compares).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.librarian.notes.links import INLINE_BUDGET, PARSE_LIMIT, scan_links
from toolwire.librarian.notes.workspace import extract_links, link_targets, strip_links

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "links"
VECTORS = sorted(p.stem for p in DATA.glob("*.md"))


def test_there_are_vectors() -> None:
    assert len(VECTORS) >= 12


@pytest.mark.parametrize("name", VECTORS)
def test_link_vector(name: str) -> None:
    body = (DATA / f"{name}.md").read_text("utf-8")
    expected = json.loads((DATA / f"{name}.json").read_text("utf-8"))
    assert list(extract_links(body)) == expected["links"]
    assert link_targets(body) == expected["targets"]
    assert strip_links(body) == expected["stripped"]


@pytest.mark.parametrize(
    ("body", "links"),
    [
        ("[g][r]\n\n[r]: b.md\n", ["b.md"]),  # the three the regex missed (issue 19)
        ("[a [b]](b.md)\n", ["b.md"]),
        ("[p](d/a(1).md)\n", ["d/a(1).md"]),
    ],
)
def test_what_the_regex_missed(body: str, links: list[str]) -> None:
    assert list(extract_links(body)) == links


@pytest.mark.parametrize("name", VECTORS)
def test_every_link_is_placed_on_its_own_text(name: str) -> None:
    """A link's span holds the link's markup (the target, or the reference label)."""
    scan = scan_links((DATA / f"{name}.md").read_text("utf-8"))
    for link in scan.links:
        assert link.start is not None and link.end is not None
        markup = scan.text[link.start : link.end]
        assert markup[0] in "[<" and markup[-1] in "])>"


def test_crlf_and_lf_bodies_give_the_same_links_and_text() -> None:
    body = "One [a](a.md)\n\n> two [[b]]\n\n[c][r]\n\n[r]: c.md\n"
    crlf = body.replace("\n", "\r\n")
    assert extract_links(crlf) == extract_links(body) == ("a.md", "b", "c.md")
    assert strip_links(crlf) == strip_links(body)


def test_a_tab_expanded_indent_is_placed() -> None:
    body = "- a\n\t  [x](x.md) b\n"  # the parser reads the tab as spaces
    assert strip_links(body) == "- a\n\t   b\n"


def test_a_link_that_cannot_be_placed_stays_in_the_text() -> None:
    """An escaped pipe in a table cell: the cell's content is not the source verbatim.
    The link is still found; strip_links keeps it, so changing it is refused (safe)."""
    body = "| h |\n|---|\n| [a\\|b](x.md) c |\n"
    assert extract_links(body) == ("x.md",)
    assert strip_links(body) == body


def test_no_bracket_no_parse() -> None:
    scan = scan_links("plain text, a < b, no links\r\n")
    assert scan.links == () and scan.text == "plain text, a < b, no links\n"


def test_a_paragraph_of_unclosed_brackets_goes_to_the_linear_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """markdown-it's label scan is quadratic in such a paragraph: past INLINE_BUDGET the
    regex fallback reads it (inline and wiki links, code spans kept out). Checked by what
    ran, not by a clock: markdown-it's inline parser never sees the paragraph."""
    from markdown_it.parser_inline import ParserInline

    seen: list[int] = []
    parse = ParserInline.parse

    def spy(self: ParserInline, src: str, *args: object) -> object:
        seen.append(len(src))
        return parse(self, src, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ParserInline, "parse", spy)
    body = "[x\n" * 20_000 + "`[c](c.md)` [a](a.md) [[w]]\n"
    assert body.count("[") * len(body) > INLINE_BUDGET
    assert extract_links(body) == ("a.md", "w")
    assert strip_links(body).endswith("`[c](c.md)`  \n")
    assert all(n < 1_000 for n in seen)
    assert extract_links("[a](a.md)\n") == ("a.md",) and seen  # the spy does see a parse


def test_a_body_over_the_parse_limit_is_read_by_the_fallback() -> None:
    filler = "Some text.\n\n" * (PARSE_LIMIT // 12 + 1)
    body = filler + "```\n[in](fence.md)\n```\n[out](out.md) and [[wiki]]\n"
    assert len(body) > PARSE_LIMIT
    assert extract_links(body) == ("out.md", "wiki")
    assert strip_links(body) == filler + "```\n[in](fence.md)\n```\n and \n"


_PIECES = st.sampled_from(
    ["[", "]", "(", ")", "<", ">", "`", "``", "!", "\\", "\n", "\r\n", "\t", " ", "> ", "- ",
     "|", "---", "```", "~~~", "    ", "a", "b.md", "https://x", "[[", "]]", ":", '"', "#", "\x00"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join))
def test_any_text_gives_placed_spans_and_a_stripped_text(body: str) -> None:
    """Never an exception; every placed span is inside the text and starts a link."""
    scan = scan_links(body)
    for link in scan.links:
        if link.start is not None:
            assert link.end is not None and 0 <= link.start < link.end <= len(scan.text)
            assert scan.text[link.start] in "[<"
    for start, end in scan.definitions:
        assert 0 <= start < end <= len(scan.text)
    assert len(strip_links(body)) <= len(scan.text)
