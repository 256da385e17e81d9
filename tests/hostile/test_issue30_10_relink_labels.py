"""Issue #30 item 10: ``relink_note`` may add links, not prose.

On the main of 2026-11-25 a relink could put free text in a user's note as
the label of an existing link, a wiki alias or a reference title ("URGENT:
your account is locked. Call +1 555 0100 ..."): the text *around* links was
checked, the text *of* links was not. Now every link a relink adds or changes
may show only its target's title or name (or nothing, or words the note
already showed in a link); anything else is ``RELINK_CHANGES_TEXT``. Real
relinks (a broken target fixed under the user's own label, a new link labelled
with the target's title) still plan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.domain import Operation
from toolwire.librarian.notes.workspace import Workspace
from toolwire.librarian.validate import validate_operations
from toolwire.spec.model import Constraints

AREA = "issue 30 #10: relink labels"
PROSE = "URGENT: your account is locked. Call +1 555 0100"

NOTE = """# Sourdough

Feed the starter, see [Bread basics](bread.md) and [[cooking/oven|the oven]].
Old link: [Crust notes](crust-old.md). More in [the guide][g].

[g]: bread.md "Bread"
"""


# The spec's own model (validate reads its typed fields; a stand-in would hide a rename).
_Limits = Constraints(max_operations=10)


def _relink(body: str) -> Operation:
    return Operation("op", "relink_note", "sourdough", None, "Sourdough", body, "r", 0.9)


ATTACKS = {
    "existing label": NOTE.replace("[Bread basics](bread.md)", f"[{PROSE}](bread.md)"),
    "wiki alias": NOTE.replace("[[cooking/oven|the oven]]", f"[[cooking/oven|{PROSE}]]"),
    "reference title": NOTE.replace('[g]: bread.md "Bread"', f'[g]: bread.md "{PROSE}"'),
    "inline title": NOTE.replace("(bread.md)", f'(bread.md "{PROSE}")'),
    "new link label": NOTE.replace("the starter,", f"the starter,[{PROSE}](bread.md)"),
    "new wiki alias": NOTE.replace("the starter,", f"the starter,[[bread|{PROSE}]]"),
    "retarget with prose": NOTE.replace("[Crust notes](crust-old.md)", f"[{PROSE}](crust.md)"),
    "collapsed reference": NOTE.replace("[the guide][g]", f"[{PROSE}]").replace(
        "[g]: bread.md", f"[{PROSE}]: bread.md"
    ),
    "anchor label": NOTE.replace("the starter,", f"the starter,[{PROSE}](#sourdough)"),
}
ALLOWED = {
    "retarget keeps the user's label": NOTE.replace("(crust-old.md)", "(crust.md)"),
    "new link shows the title": NOTE.replace("the starter,", "the starter,[Crust](crust.md)"),
    "new link shows the file name": NOTE.replace(
        "the starter,", "the starter,[crust.md](crust.md)"
    ),
    "wiki without alias": NOTE.replace("the starter,", "the starter,[[crust]]"),
    "wiki alias is the title": NOTE.replace("[[cooking/oven|the oven]]", "[[cooking/oven|Oven]]"),
    "unchanged": NOTE,
}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "sourdough.md").write_text(NOTE, encoding="utf-8")
    (tmp_path / "bread.md").write_text("# Bread\n", encoding="utf-8")
    (tmp_path / "crust.md").write_text("# Crust\n", encoding="utf-8")
    (tmp_path / "cooking").mkdir()
    (tmp_path / "cooking" / "oven.md").write_text("# Oven\n", encoding="utf-8")
    return Workspace.load(tmp_path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_item_10_a_relink_cannot_put_prose_in_a_link(
    ws: Workspace, tally: Tally, name: str
) -> None:
    (got,) = validate_operations(
        [_relink(ATTACKS[name])], ws, turn=0, constraints=_Limits, topics=[]
    )
    tally.add(AREA, "inputs tried")
    assert got.status == "rejected" and got.code == "RELINK_CHANGES_TEXT", (name, got)
    tally.add(AREA, "rejected with a code")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(ALLOWED))
def test_item_10_real_relinks_still_plan(ws: Workspace, tally: Tally, name: str) -> None:
    (got,) = validate_operations(
        [_relink(ALLOWED[name])], ws, turn=0, constraints=_Limits, topics=[]
    )
    tally.add(AREA, "inputs tried")
    assert got.status == "planned" and got.code is None, (name, got)
