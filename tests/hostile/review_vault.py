"""A vault, a scorer spec and real CLI processes for the review and undo cases (issue 45).

The scorer (bundled e5, ``min_confidence: 1.0``) makes every untagged note a question and
plans a retag for the notes it is sure of; the replayed model only closes the envelope.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TOOLWIRE = Path(sys.executable).parent / "toolwire"

EMPTY_ANSWER = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>-</summary>\n<operations>\n</operations>\n<warnings></warnings>\n"
    "</librarian_response>"
)

NOTES = {
    "scratch.md": "Things to sort out this week: the printer on floor 2 is out of toner,\n"
    "lunch order for Friday, ask Ana about the budget for the offsite.\n",
    "lisbon.md": "Lisbon long weekend: the train from Porto, a hotel near Alfama,\n"
    "pack light, visit the Belem tower and take tram 28 to the castle.\n",
    "bread.md": "Sourdough: feed the starter the night before, 75% hydration,\n"
    "stretch and fold every 30 minutes, bake at 250 C in a Dutch oven.\n",
}


# The user's own tagged notes: the scorer applies a topic only where examples agree.
EXAMPLES = {
    "examples/pasta.md": "---\ntags: [cooking]\n---\nPasta: boil salted water, cook the "
    "spaghetti al dente, toss with garlic, olive oil and chili.\n",
    "examples/rome.md": "---\ntags: [travel]\n---\nRome trip: the train from Florence, a "
    "hotel near the Pantheon, pack light, visit the Colosseum.\n",
    "examples/standup.md": "---\ntags: [work]\n---\nOffice chores: book the meeting room, "
    "order toner for the printer, send the budget to finance.\n",
}


def write_vault(root: Path, notes: dict[str, str] | None = None) -> Path:
    """``notes`` (default NOTES) beside the tagged EXAMPLES."""
    for rel, text in {**EXAMPLES, **(NOTES if notes is None else notes)}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_spec(tmp: Path, *, min_confidence: float = 1.0, titles: bool = False) -> Path:
    """Topics cooking and travel; the scorer decides; with ``min_confidence`` 1.0 every
    untagged note is deferred (a question); with 0.0 it retags what it can."""
    (tmp / "script.jsonl").write_text(
        json.dumps({"text": EMPTY_ANSWER, "finish_reason": "stop"}) + "\n", encoding="utf-8"
    )
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: review-hostile
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [cooking, travel, work]
  descriptions:
    cooking: recipes, baking, food and kitchens
    travel: trips, itineraries, transport, packing and places to visit
    work: the office, meetings, budgets, printers and chores at work
judgement:
  decide: scorer
  embedder: e5-small
  write_titles: {"true" if titles else "false"}
constraints:
  batch_size: 50
  max_operations: 50
  min_confidence: {min_confidence}
  allowed_kinds: [retag_note, {"retitle_note, " if titles else ""}defer]
memory:
  synthesis: "off"
""",
        encoding="utf-8",
    )
    return spec


def toolwire(
    *args: str | Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it (``TOOLWIRE_USER=ana``)."""
    return subprocess.run(
        [str(TOOLWIRE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TOOLWIRE_USER": "ana", **env},
    )


def ok(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    done = toolwire(*args, **env)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def sql(db: Path, query: str) -> list[dict[str, Any]]:
    return json.loads(ok("sql", "--db", db, "--format", "json", query).stdout)


def digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.md"))
        if ".toolwire" not in p.parts
    }


def last_run(db: Path) -> str:
    return sql(db, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0]["run_id"]
