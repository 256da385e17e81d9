"""Edit a note's YAML front matter in place: only the values an operation changes.

The user's block is their file: comments, key order, quoting, list style (flow
``[a, b]`` or block ``- a``) and blank lines stay as they were. ruamel.yaml's
round-trip mode loads the block into commented containers and dumps it back with
only the edited nodes new; ``yaml.safe_dump`` would re-write the whole block.

Rules the librarian follows (README, "What the librarian changes"):
- a retitle sets ``title`` and nothing else;
- a retag sets ``topic`` and, in ``tags``, replaces the taxonomy topics with the
  new ones, keeping every other tag in place (the user's ``investing`` stays).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

__all__ = ["FrontMatterEditError", "edit_block", "new_block", "retagged"]


class FrontMatterEditError(ValueError):
    """The block cannot be edited safely (toolwire's reader accepted it, ruamel did not)."""


def _yaml(inner: str = "") -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long title onto two lines
    # Keep the block's own list indentation ("- a" under its key, or "  - a").
    m = re.search(r"^( *)- ", inner, re.M)
    offset = len(m.group(1)) if m else 0
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yaml


def retagged(old_tags: Any, old_topic: Any, new_topics: Sequence[str], taxonomy: Sequence[str]):
    """``tags`` after a retag: taxonomy topics (and the old topic) replaced by the new
    topics at the first replaced position, every other tag kept in order."""
    replaced = {str(t) for t in taxonomy} | ({str(old_topic)} if old_topic else set())
    if isinstance(old_tags, str):  # "networking, dns": keep the user's comma string form
        items = [t.strip() for t in old_tags.split(",") if t.strip()]
        return ", ".join(_merge(items, replaced, new_topics))
    if isinstance(old_tags, list):
        merged = _merge(list(old_tags), replaced, new_topics)
        if isinstance(old_tags, CommentedSeq):
            # Edit the user's sequence in place: comments stay on their lines, style stays.
            seq = old_tags
            for i, value in enumerate(merged):
                if i < len(seq):
                    if seq[i] != value:
                        seq[i] = value
                else:
                    seq.append(value)
            del seq[len(merged) :]
            return seq
        return merged
    if old_tags is None:  # `tags:` empty or absent: the topics are the only tags
        seq = CommentedSeq(list(new_topics))
        seq.fa.set_flow_style()
        return seq
    return None  # a tags value of another type is the user's: left alone


def _merge(items: list[Any], replaced: set[str], new_topics: Sequence[str]) -> list[Any]:
    """New topics where the first replaced tag stood (else first); other tags in order."""
    wanted = set(new_topics)
    out: list[Any] = []
    placed = False
    for item in items:
        if str(item) in replaced or str(item) in wanted:
            if not placed:
                out.extend(new_topics)
                placed = True
            continue
        if item not in out:
            out.append(item)
    return out if placed else [*new_topics, *out]


def edit_block(
    inner: str,
    *,
    set_values: Mapping[str, Any] | None = None,
    retag: tuple[Sequence[str], Sequence[str]] | None = None,
) -> str:
    """The block's text (between the ``---`` lines, ``\\n`` endings) with the edits.

    ``set_values`` sets keys (new keys go last); ``retag`` is (new topics, taxonomy).
    Returns ``inner`` unchanged when no value changes.
    """
    yaml = _yaml(inner)
    try:
        data = yaml.load(inner) if inner.strip() else CommentedMap()
    except YAMLError as exc:
        raise FrontMatterEditError(f"front matter cannot be edited in place: {exc}") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, CommentedMap):
        raise FrontMatterEditError("front matter is not a YAML mapping")
    changed = False
    for key, value in (set_values or {}).items():
        if data.get(key) != value or key not in data:
            data[key] = value
            changed = True
    if retag is not None:
        topics, taxonomy = retag
        before = _as_list(data.get("tags")) if "tags" in data else None
        new_tags = retagged(data.get("tags"), data.get("topic"), topics, taxonomy)
        if new_tags is not None and _as_list(new_tags) != before:
            data["tags"] = new_tags
            changed = True
        if data.get("topic") != topics[0]:
            data["topic"] = topics[0]
            changed = True
    if not changed:
        return inner
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [str(t) for t in value]
    return []


def new_block(values: Mapping[str, Any]) -> str:
    """A fresh block's inner text for a note that had none."""
    out = io.StringIO()
    _yaml().dump(CommentedMap(values), out)
    return out.getvalue()
