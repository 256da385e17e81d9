"""A relink adds links, not prose: the words a link shows must be the target's own.

Why. ``relink_note`` is checked to change only links (``RELINK_CHANGES_TEXT``:
the text around them must stay), but a link carries text of its own: its label
``[label](t.md)``, a wiki alias ``[[t|alias]]``, a title ``[x](t.md "title")``
or a reference definition's title ``[r]: t.md "title"``. Issue #30 item 10: a
relink put "URGENT: your account is locked. Call +1 555 0100" there, in a
user's note. So every link a relink adds or changes (its markdown differs from
every link the note had) may only show, in each of those places:

* nothing (``[[t]]``, no title);
* words the note already showed as a link label or title (retargeting
  ``[Bread recipe](bred.md)`` to ``bread.md`` keeps the user's label);
* the target's own name: its title, its id, its file name with or without
  ``.md``, or the target as written (``[bread.md](bread.md)``, an autolink).

Compared after folding case and whitespace. The rejection is
``RELINK_CHANGES_TEXT``, the code of a relink that writes text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from toolwire.librarian.notes.links import scan_links

__all__ = ["link_texts", "unearned_label"]

# A reference definition's optional title: "t", 't' or (t) after the destination.
_DEF_TITLE = re.compile(
    r"""^\s{0,3}\[[^\]]*\]:\s*(<[^>]*>|\S+)\s*(?:"([^"]*)"|'([^']*)'|\(([^)]*)\))?"""
)
_INLINE_TITLE = re.compile(r"""\s(?:"([^"]*)"|'([^']*)'|\(([^)]*)\))\s*\)$""")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _label(span: str) -> str:
    """The text between a link's first ``[`` and its matching ``]`` (escapes skipped)."""
    depth, i = 0, 0
    while i < len(span):
        char = span[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return span[1:i]
        i += 1
    return span


def _shown(kind: str, span: str) -> list[str]:
    """The words a link shows beside its target: label, alias, title."""
    if kind == "wiki":
        inner = span[2:-2]
        return [inner.split("|", 1)[1]] if "|" in inner else []
    if kind == "autolink":
        return []  # <https://...> shows its target, nothing else
    label = _label(span)
    rest = span[len(label) + 2 :]
    shown = [label]
    if rest.startswith("["):  # [label][ref]: the ref is a name, not shown text
        return shown
    title = _INLINE_TITLE.search(rest)
    if title is not None:
        shown.append(next(g for g in title.groups() if g is not None))
    return shown


def link_texts(body: str) -> list[tuple[str, str, list[str]]]:
    """(markdown of the link, target, words it shows) for every link and definition."""
    scan = scan_links(body)
    found = []
    for link in scan.links:
        if link.start is None or link.end is None:
            continue
        span = scan.text[link.start : link.end]
        found.append((span, link.target, _shown(link.kind, span)))
    for start, end in scan.definitions:
        for line in scan.text[start:end].splitlines():
            match = _DEF_TITLE.match(line)
            if match is None:
                continue
            titles = [g for g in match.groups()[1:] if g]
            found.append((line.strip(), match.group(1).strip("<>"), titles))
    return found


def unearned_label(
    old_body: str, new_body: str, names_of: Callable[[str], Iterable[str]]
) -> str | None:
    """The first text an added or changed link shows that is neither the note's nor the
    target's (``names_of(target)``: the target note's title, id, file names), else None."""
    old = link_texts(old_body)
    earned = {_fold(text) for _, _, shown in old for text in shown}
    before = Counter(span for span, _, _ in old)
    for span, target, shown in link_texts(new_body):
        if before[span] > 0:
            before[span] -= 1
            continue  # this very link was there: nothing new shown
        allowed = earned | {_fold(target)} | {_fold(n) for n in names_of(target)}
        for text in shown:
            if _fold(text) and _fold(text) not in allowed:
                return text
    return None
