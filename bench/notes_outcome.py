"""The quickstart's outcome on ``data/notes``, measured against its folder labels.

``python -m bench.notes_outcome WORKSPACE`` compares a workspace after a librarian run
with ``data/notes`` before it: labelled notes (every note under ``tech/<topic>/`` or
``home/<topic>/``, plus ``inbox/alerting-rules-draft`` = observability) that end with
the right topic, right topics replaced, user tags lost, front-matter comments lost.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.fixtures import NOTES_DIR as NOTES
from bench.fixtures import SAMPLE_TOPICS as TOPICS
from toolwire.librarian.notes.workspace import Workspace

EXTRA_LABELS = {"inbox/alerting-rules-draft.md": "observability"}


def labels() -> dict[str, str]:
    out = dict(EXTRA_LABELS)
    for path in NOTES.rglob("*.md"):
        rel = path.relative_to(NOTES).as_posix()
        parts = rel.split("/")
        if parts[0] in ("tech", "home") and parts[1] in TOPICS:
            out[rel] = parts[1]
    return out


def _topic(note) -> str | None:  # type: ignore[no-untyped-def]
    if note.topic in TOPICS:
        return note.topic
    return next((t for t in note.tags if t in TOPICS), None)


def measure(after_root: Path) -> dict[str, int]:
    before, after = Workspace.load(NOTES), Workspace.load(after_root)
    b = {n.path: n for n in before.notes.values()}
    a = {n.path: n for n in after.notes.values()}
    lab = labels()
    right_before = sum(_topic(b[p]) == t for p, t in lab.items())
    right_after = sum(_topic(a[p]) == t for p, t in lab.items())
    replaced = sum(_topic(b[p]) == t and _topic(a[p]) != t for p, t in lab.items())
    tags_lost = sum(len({t for t in b[p].tags if t not in TOPICS} - set(a[p].tags)) for p in b)
    comments_lost = sum(b[p].raw.decode().count("\n#") > a[p].raw.decode().count("\n#") for p in b)
    return {
        "labelled": len(lab),
        "right_before": right_before,
        "right_after": right_after,
        "right_replaced": replaced,
        "user_tags_lost": tags_lost,
        "notes_losing_comment_lines": comments_lost,
    }


if __name__ == "__main__":
    print(measure(Path(sys.argv[1])))
