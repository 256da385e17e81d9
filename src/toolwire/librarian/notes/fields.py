"""What a note's front matter and text say about it: its title and its tags.

A title is the front matter ``title`` when that is text (``title: true`` or a
list is not a title), else the first ``# H1`` outside code; one line, cut to
``MAX_TITLE_CHARS`` wherever it is used (issue 30 item 6: the topic scorer once
embedded a 198,604-character first heading). Tags come in every form
:mod:`toolwire.librarian.notes.tags` reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from toolwire.librarian.notes.prose import map_prose
from toolwire.librarian.notes.tags import front_matter_tags

__all__ = ["MAX_TITLE_CHARS", "scalar_text", "tags_of", "title_of"]

MAX_TITLE_CHARS = 200
_H1 = re.compile(r"^ {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
# A heading line may be 200 KB long: only its start is matched (the title is cut
# anyway), so the lazy pattern above stays linear.
_H1_SCAN_CHARS = 1024


def _first_h1(body: str) -> str:
    title = ""

    def find(chunk: str) -> str:
        nonlocal title
        if not title:
            for line in chunk.splitlines():
                m = _H1.match(line[:_H1_SCAN_CHARS])
                if m and m.group(1).strip():
                    title = m.group(1).strip()
                    break
        return chunk

    map_prose(body, find)
    return title


def scalar_text(value: Any) -> str:
    return "" if value is None or isinstance(value, dict | list) else str(value).strip()


def title_of(data: dict[str, Any], body: str) -> str:
    """The front matter title if it is text, else the first ``# H1``; one line, cut to
    MAX_TITLE_CHARS. A title of another type (``title: true``, a list) is not a title."""
    raw = data.get("title")
    title = raw.strip() if isinstance(raw, str) else ""
    title = title or _first_h1(body)
    first_line = title.splitlines()[0].strip() if title else ""
    return first_line[:MAX_TITLE_CHARS]


def tags_of(data: dict[str, Any], body_tags: Iterable[str]) -> tuple[str, ...]:
    """Every tag of the note, as written: front matter ``tags`` (list or string),
    front matter ``topic``, then the inline ``#tags`` of the body."""
    tags = front_matter_tags(data.get("tags"))
    topic = scalar_text(data.get("topic"))
    if topic:
        tags.append(topic)
    tags += body_tags
    return tuple(dict.fromkeys(t for t in tags if t))
