"""Keys of the per-note evidence (store/evidence.py) and titles taken from the note."""

from __future__ import annotations

import pytest

from toolwire.librarian.answer import derive_title, grounded_title
from toolwire.store.evidence import DecisionLedger, decision_key, embedder_id

pytestmark = pytest.mark.unit


def _inputs(**change: object) -> str:
    args: dict = {"spec_hash": "s", "embedder": "e", "model": "m", "examples": [("n1", "t")]}
    return DecisionLedger.inputs_fingerprint(**(args | change))


def test_every_input_of_a_decision_changes_its_key() -> None:
    base = decision_key("note-sha", _inputs())
    assert decision_key("note-sha", _inputs()) == base
    assert decision_key("other-sha", _inputs()) != base
    for change in (
        {"spec_hash": "s2"},
        {"embedder": "e2"},
        {"model": "m2"},
        {"examples": [("n1", "t2")]},
        {"examples": [("n1", "t"), ("n2", "t")]},
    ):
        assert decision_key("note-sha", _inputs(**change)) != base, change
    # The order the examples were read in is not an input.
    two = [("n1", "t"), ("n2", "u")]
    assert _inputs(examples=two) == _inputs(examples=two[::-1])


def test_the_embedder_id_names_its_package_version() -> None:
    class E5:
        name = "e5-small"

    class Plain:
        name = "plain"

    assert embedder_id(E5()).startswith("e5-small@")
    assert embedder_id(Plain()) == "plain"


@pytest.mark.parametrize(
    ("body", "title"),
    [
        ("## Meaning\n\nSome pods crash. More.", "Some pods crash"),
        ("Intro line. More.\n\n## Later heading", "Intro line"),
        ("## Only headings\n\n### here", "Only headings"),
        ("| a | b |\n|---|---|\n\nAfter the table.", "After the table"),
        (
            "notes from the sync, copied from my phone\n\n- item",
            "notes from the sync, copied from my phone",
        ),
        ("- [x] buy [milk](https://example.org) now. Then more.", "buy milk now"),
        ("```\n# a shell comment\n```\nPlain text after the code.", "Plain text after the code"),
        ("See [[Other note|the other note]] for this.", "See the other note for this"),
        ("", ""),
        ("---\n***\n", ""),
    ],
)
def test_a_derived_title_is_the_first_sentence_else_the_first_heading(
    body: str, title: str
) -> None:
    assert derive_title(body) == title


def test_a_long_first_sentence_is_cut_at_a_word_and_stays_grounded() -> None:
    body = "Whetstone routine for the chef's knife, every couple of weeks when it drags"
    assert derive_title(body, max_chars=50) == "Whetstone routine for the chef's knife"  # a clause
    title = derive_title(body.replace(",", ""), max_chars=40)
    assert title == "Whetstone routine for the chef's knife"  # the last whole word
    assert grounded_title(title, body)


def test_a_cut_title_does_not_end_on_a_dangling_word() -> None:
    body = "wg-quick up wg0 brings the tunnel up from /etc/wireguard/wg0.conf; wg show"
    assert derive_title(body, max_chars=45) == "wg-quick up wg0 brings the tunnel up"
    assert derive_title("the the the the the the", max_chars=10) == "the"  # never empty
