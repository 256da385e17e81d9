"""How one note links to another, written the way Obsidian resolves it.

Wikilinks: ``[[name]]`` when the file name is unique in the vault, else the shortest
path suffix that is (Obsidian's "shortest path when possible"); ``|title`` when the
note's title differs from what the link shows. Markdown links: the target's path
relative to the linking note, spaces and other unsafe characters percent-encoded.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["LinkNamer", "vault_link_style"]


def _stem(path: str) -> str:
    return path.removesuffix(".md")


class LinkNamer:
    """Link texts for one vault (its note paths)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = sorted(paths)
        names = Counter(p.rsplit("/", 1)[-1].casefold() for p in self.paths)
        self._clashing = {n for n, c in names.items() if c > 1}

    def wiki_target(self, path: str) -> str:
        """The shortest text ``[[...]]`` resolves to ``path`` by (without ``.md``)."""
        name = path.rsplit("/", 1)[-1]
        if name.casefold() not in self._clashing:
            return _stem(name)
        return _stem(path)  # Obsidian resolves a full path unambiguously

    def wikilink(self, path: str, title: str) -> str:
        target = self.wiki_target(path)
        shown = target.rsplit("/", 1)[-1]
        safe = title and not any(c in title for c in "|[]#^\n")
        return f"[[{target}|{title}]]" if safe and title != shown else f"[[{target}]]"

    @staticmethod
    def markdown_link(from_path: str, path: str, title: str) -> str:
        base = posixpath.dirname(from_path)
        rel = posixpath.relpath(path, base or ".")
        label = (title or _stem(path.rsplit("/", 1)[-1])).replace("[", "(").replace("]", ")")
        return f"[{label}]({quote(rel, safe='/-_.~')})"


def vault_link_style(wiki_links: int, markdown_links: int) -> str:
    """``wikilink`` unless the vault's note links are mostly markdown links."""
    return "markdown" if markdown_links > wiki_links else "wikilink"
