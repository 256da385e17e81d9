"""A note's front matter as data, read safely and as its owner wrote it.

Notes are untrusted YAML (issue 30 item 3): ``a: &a [*a]`` builds a structure
that contains itself (every walk over it never ends) and nine levels of nine
aliases (the "billion laughs") expand to 9^9 values from a few hundred bytes.
PyYAML shares aliased nodes, so both load in an instant; the harm comes later,
from whatever walks the result. The composed node graph is therefore checked
before anything is built from it: a cycle (a recursive alias) is refused, and
so is a document whose values, counted through every alias, pass
``MAX_VALUES``. The count is memoised per node, so the check is linear in the
size of the text, whatever the expansion.

Notes are read with libyaml when PyYAML has it (2,180 notes, 9 MB: 0.24 CPU s
per load against 0.32 s with yaml.safe_load before); edits use the pure-Python
parser, whose nodes carry exact character positions.

Plain scalars keep their text: only ``null``/``~``/empty and the YAML 1.2
booleans (``true``/``false``) are resolved. YAML 1.1 would read ``title: no``
as False, ``id: 007`` as 7, ``version: 1.10`` as 1.1 and ``date: 2024-05-01``
as a date; Obsidian and the user mean the text they typed. Explicitly tagged
values (``!!int 5``) are still what their tag says.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

__all__ = ["MAX_VALUES", "FrontMatterRefused", "load_front_matter", "yaml_events_use_aliases"]

# Values in one note's front matter, counted through aliases. Real notes hold tens;
# a bomb holds millions. Walks over front matter (id/title checks) stay bounded by it.
MAX_VALUES = 100_000


class FrontMatterRefused(ValueError):
    """The front matter is unsafe to build (a recursive alias, an alias bomb, too deep)."""


class _NoteLoader(yaml.SafeLoader):
    """SafeLoader resolving only null and YAML 1.2 booleans (and ``<<`` merge keys).
    Pure Python: the editor needs its exact character positions."""


# libyaml's parser when PyYAML was built with it: ~5x faster on every note of a run.
# It refuses nesting past 1,000 levels itself ("exceeded maximum nesting depth").
_FastNoteLoader: type[yaml.SafeLoader] = type(
    "_FastNoteLoader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {}
)

for _loader in (_NoteLoader, _FastNoteLoader):
    _loader.yaml_implicit_resolvers = {}
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
    )
    _loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def check_expansion(root: Node, limit: int = MAX_VALUES) -> int:
    """The number of values ``root`` expands to; FrontMatterRefused on a cycle or past ``limit``.

    Iterative depth-first walk: a node met again while it is still open is an
    alias to one of its own ancestors (a cycle); a finished node's count is reused.
    """
    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            open_nodes.discard(key)
            total = 1 + sum(size[id(child)] for child in _children(node))
            if total > limit:
                raise FrontMatterRefused(
                    f"its aliases expand to more than {limit:,} values (an alias bomb)"
                )
            size[key] = total
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise FrontMatterRefused("it holds a recursive alias (a value that contains itself)")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    return size[id(root)]


def load_front_matter(text: str) -> Any:
    """The YAML document in ``text`` (None when empty).

    Raises ``yaml.YAMLError`` for text that is not YAML and FrontMatterRefused for
    YAML that is unsafe to build or walk (recursive aliases, alias bombs, nesting
    deep enough to exhaust the parser's recursion).
    """
    try:
        return _load_with(_FastNoteLoader, text)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise FrontMatterRefused("it is nested too deeply") from None
        if not getattr(yaml, "__with_libyaml__", False):
            raise  # the pure parser already said it
    # libyaml refuses some text PyYAML reads (an escaped lone surrogate "\ud800"):
    # the pure parser decides, so a note reads the same with or without libyaml.
    return _load_with(_NoteLoader, text)


def _load_with(loader_class: type[yaml.SafeLoader], text: str) -> Any:
    loader = loader_class(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise FrontMatterRefused("it is nested too deeply") from None
        if node is None:
            return None
        check_expansion(node)
        try:
            return loader.construct_document(node)
        except RecursionError:
            raise FrontMatterRefused("it is nested too deeply") from None
    finally:
        loader.dispose()


def yaml_events_use_aliases(text: str) -> bool:
    """Whether ``text`` defines an anchor, uses an alias or a ``<<`` merge key.

    An edit of such a block could write through an alias (retagging ``tags: &t``
    would change every ``*t``) or into a merged mapping; the editor refuses it.
    Reads events only (nothing is built); raises ``yaml.YAMLError`` on bad YAML.
    """
    for event in yaml.parse(text, Loader=_NoteLoader):
        if isinstance(event, yaml.AliasEvent):
            return True
        if getattr(event, "anchor", None) is not None:
            return True
        if isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.style is None:
            return True
    return False
