"""Index notes: one note per topic listing its notes (title and one line), in a block
toolwire owns (``index``); whatever the user writes around the block stays.

An index note is ``<folder>/<topic>.md``. Created with its topic in front matter (so
the scorer reads it as already filed, and a second run has nothing to add) and a
``# <topic>`` heading; the notes in the folder are indexes, never listed themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from toolwire.librarian.notes.workspace import Note, Workspace

__all__ = ["index_blocks", "index_path", "is_index", "one_line"]

_MARKUP = re.compile(r"^\s*(?:#+\s*|[-*+>]\s+|\d+[.)]\s+)")
_ONE_LINE_CHARS = 100


def index_path(folder: str, topic: str) -> str:
    return f"{folder.strip('/')}/{topic}.md"


def is_index(path: str, folder: str) -> bool:
    return path.startswith(folder.strip("/") + "/")


def one_line(note: Note) -> str:
    """The note's first line of prose (not its heading), cut at a word."""
    for line in note.body.splitlines():
        text = _MARKUP.sub("", line).strip()
        if not text or text.startswith(("```", "---", "<!--", "|")) or text == note.title:
            continue
        text = " ".join(text.split())
        if len(text) > _ONE_LINE_CHARS:
            text = text[:_ONE_LINE_CHARS].rsplit(" ", 1)[0] + "…"
        return text
    return ""


def index_blocks(
    view: Workspace,
    topics: Sequence[str],
    folder: str,
    topic_of: Callable[[Note], str | None],
    link: Callable[[str, Note], str],
) -> dict[str, str]:
    """The ``index`` block content of each topic's index note, by its path; a topic
    without notes gets no index note (an existing one is emptied)."""
    members: dict[str, list[Note]] = {t: [] for t in topics}
    for note in view.notes.values():
        topic = topic_of(note)
        if topic in members and not is_index(note.path, folder):
            members[topic].append(note)
    blocks = {}
    for topic, notes in members.items():
        path = index_path(folder, topic)
        if not notes and view.note_at(path) is None:
            continue
        lines = []
        for note in sorted(notes, key=lambda n: ((n.title or n.path).casefold(), n.path)):
            line = one_line(note)
            lines.append(f"- {link(path, note)}" + (f": {line}" if line else ""))
        blocks[path] = "\n".join(lines)
    return blocks
