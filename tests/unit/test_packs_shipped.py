"""Prompt packs ship in the package and a spec names one (issue 42): a spec kept in the
user's own repository once looked for ``prompt-packs/`` beside itself and failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.promptpack.pack import load_pack
from toolwire.promptpack.shipped import SHIPPED_PACKS, shipped_pack_names
from toolwire.spec.model import load_spec_text
from toolwire.spec.paths import spec_reads_outside

pytestmark = pytest.mark.unit

SPEC = """name: mine
version: "1"
transport: xml_attrless
model: llamacpp:smollm2-135m
prompt_pack: {pack}
taxonomy:
  topics: [a, b]
"""


def test_the_shipped_packs_are_in_the_package_and_load() -> None:
    assert SHIPPED_PACKS.parent.name == "toolwire"
    assert shipped_pack_names() == ["agent", "librarian", "librarian-small"]
    for name in shipped_pack_names():
        assert load_pack(SHIPPED_PACKS / name).stages, name


@pytest.mark.parametrize("name", ["librarian-small", "librarian"])
def test_a_spec_anywhere_names_a_shipped_pack(tmp_path: Path, name: str) -> None:
    loaded = load_spec_text(SPEC.format(pack=name), base_dir=tmp_path)
    assert loaded.pack_dir == SHIPPED_PACKS / name
    assert spec_reads_outside(loaded) == []  # the package's own pack is no outside read


def test_a_folder_beside_the_spec_is_a_path_and_wins_over_a_name(tmp_path: Path) -> None:
    own = tmp_path / "librarian-small"
    own.mkdir()
    assert load_spec_text(SPEC.format(pack="librarian-small"), base_dir=tmp_path).pack_dir == own
    rel = load_spec_text(SPEC.format(pack="./packs/p"), base_dir=tmp_path)
    assert rel.pack_dir == tmp_path / "packs" / "p"


def test_an_unknown_name_stays_a_path_beside_the_spec(tmp_path: Path) -> None:
    loaded = load_spec_text(SPEC.format(pack="no-such-pack"), base_dir=tmp_path)
    assert loaded.pack_dir == tmp_path / "no-such-pack"
