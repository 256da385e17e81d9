"""Edit a note's YAML front matter in place: only the characters of the values that change.

The user's block is their file: comments (also inside a flow list ``[a, # why``
and in a block holding nothing else), key order, quoting, list style (flow
``[a, b]``, block ``- a``, a ``"a, b"`` or ``"a b"`` string) and blank lines
stay as they were. The block is composed with PyYAML, whose nodes carry their
exact start and end in the text; each edit splices new text into those spans
and everything else is copied. The result is read back and compared with what
was meant (every other key equal, the edited ones as asked); any difference
refuses the edit rather than writing something else (``FrontMatterEditError``).

A block that defines an anchor, uses an alias or a ``<<`` merge key is never
edited (issue 30 item 2): an edit there could write through the alias into a
value the user keeps elsewhere (``other: *t``) or into a merged mapping.

Rules the librarian follows (README, "What the librarian changes"):
- a retitle sets ``title`` and nothing else;
- a retag replaces the taxonomy topics in ``tags`` by the new ones, keeping
  every other tag in place (the user's ``investing`` stays, a nested
  ``cooking/bread`` stays and already carries ``cooking``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from toolwire.librarian.notes.frontmatter_load import (
    FrontMatterRefused,
    _NoteLoader,
    check_expansion,
    load_front_matter,
    yaml_events_use_aliases,
)
from toolwire.librarian.notes.tags import carries, front_matter_tags

__all__ = [
    "FrontMatterAliasError",
    "FrontMatterEditError",
    "TagEdit",
    "edit_block",
    "list_value",
    "merge_tags",
    "new_block",
    "render_scalar",
]


_TAG_SEPARATORS = re.compile(r"[,\s]+")


class FrontMatterEditError(ValueError):
    """The block cannot be edited in place safely; the note is left as it is."""

    code = "INVALID_FRONT_MATTER"


class FrontMatterAliasError(FrontMatterEditError):
    """The block uses YAML anchors, aliases or merge keys: an edit could write through them."""

    code = "FRONT_MATTER_ALIAS"


@dataclass(frozen=True, slots=True)
class TagEdit:
    """A retag of the ``tags`` value: ``replaced`` tags (taxonomy topics and the old
    topic, compared without case) give way to ``topics``; a topic in ``carried`` (the
    note has it elsewhere, inline or nested) is not added again. ``add``: put the
    topics in even when no replaced tag is there."""

    topics: tuple[str, ...]
    replaced: frozenset[str]
    carried: frozenset[str] = frozenset()
    add: bool = True
    style: str = "flow"  # a new ``tags`` value's form: block, flow or string (conventions)


@dataclass(frozen=True, slots=True)
class _TagPlan:
    front: list[str]  # topics put before the first tag (no replaced tag was there)
    at: int | None  # the first replaced tag's index: the new topics take its place
    new: list[str]
    delete: frozenset[int]  # the other replaced tags


def _tag_plan(items: Sequence[str], edit: TagEdit) -> _TagPlan:
    hit = [i for i, t in enumerate(items) if t.casefold() in edit.replaced]
    rest = [t for i, t in enumerate(items) if i not in hit]
    new = [t for t in edit.topics if t not in edit.carried and not carries(rest, t)]
    if not hit:
        return _TagPlan(new if edit.add else [], None, [], frozenset())
    return _TagPlan([], hit[0], new, frozenset(hit[1:]))


def merge_tags(items: Sequence[str], edit: TagEdit) -> list[str] | None:
    """``items`` after ``edit`` (new topics where the first replaced tag stood, other
    tags in order), or None when nothing changes."""
    out = _applied(_tag_plan(items, edit), items)
    return out if out != list(items) else None


def _applied(plan: _TagPlan, items: Sequence[str]) -> list[str]:
    """``items`` with ``plan`` carried out: its front first, its new topics where the
    first replaced item stood, the items it deletes left out."""
    out = list(plan.front)
    for i, item in enumerate(items):
        if i == plan.at:
            out += plan.new
        elif i not in plan.delete:
            out.append(item)
    return out


# ---------------------------------------------------------------- rendering


def render_scalar(value: str, style: str | None = None, *, flow: bool = False) -> str:
    """``value`` as YAML text, in ``style`` (``'`` or ``"``) when asked, else plain when
    plain reads back as the same string in YAML 1.1 too (``no`` is quoted)."""
    if style == '"':
        return json.dumps(value, ensure_ascii=False)
    if style == "'" and "\n" not in value:
        return "'" + value.replace("'", "''") + "'"
    if flow:
        text = yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=10**9)
        return text.strip()[1:-1]
    text = yaml.safe_dump({"k": value}, default_flow_style=False, allow_unicode=True, width=10**9)
    return text[len("k: ") :].rstrip("\n")


def _flow_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(render_scalar(v, flow=True) for v in values) + "]"


def list_value(values: Sequence[str], style: str) -> str:
    """The text after ``key:`` for a new list in the vault's ``style``: `` [a, b]``, a
    block list on the next lines (``\n  - a``, Obsidian's indent) or `` a, b``."""
    if style == "block":
        return "".join(f"\n  - {render_scalar(v)}" for v in values)
    if style == "string":
        return " " + render_scalar(", ".join(values))
    return " " + _flow_list(values)


def new_block(values: Mapping[str, Any], list_style: str = "flow") -> str:
    """A fresh block's inner text (``key: value`` lines) for a note that had none."""
    lines = []
    for key, value in values.items():
        if isinstance(value, list | tuple):
            lines.append(f"{key}:{list_value(value, list_style)}\n")
        else:
            lines.append(f"{key}: {render_scalar(value)}\n")
    return "".join(lines)


# ---------------------------------------------------------------- splicing


class _Splices:
    """Non-overlapping replacements of spans of ``text``, applied at once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.edits: list[tuple[int, int, str]] = []

    def put(self, start: int, end: int, new: str) -> None:
        self.edits.append((start, end, new))

    def result(self) -> str:
        out, pos = [], 0
        for start, end, new in sorted(self.edits, key=lambda e: (e[0], e[1])):
            if start < pos:
                raise FrontMatterEditError("front matter cannot be edited in place (overlap)")
            out += [self.text[pos:start], new]
            pos = end
        out.append(self.text[pos:])
        return "".join(out)


def _root(inner: str) -> MappingNode | None:
    loader = _NoteLoader(inner)
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise FrontMatterEditError("front matter is nested too deeply to edit") from None
    finally:
        loader.dispose()
    if node is None:
        return None
    if not isinstance(node, MappingNode):
        raise FrontMatterEditError("front matter is not a YAML mapping")
    check_expansion(node)
    return node


def _value_node(root: MappingNode | None, key: str) -> Node | None:
    found = None
    for k, v in root.value if root is not None else ():
        if isinstance(k, ScalarNode) and k.value == key:
            found = v  # YAML readers keep the last of duplicate keys
    return found


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end == -1 else end + 1


def _set_scalar(sp: _Splices, root: MappingNode | None, key: str, value: str) -> None:
    node = _value_node(root, key)
    text = sp.text
    if node is None:  # a new key goes last, after any trailing comment lines
        sep = "" if not text or text.endswith("\n") else "\n"
        sp.put(len(text), len(text), f"{sep}{key}: {render_scalar(value)}\n")
        return
    if not isinstance(node, ScalarNode):
        raise FrontMatterEditError(f"front matter {key!r} is a list or mapping, not a value")
    start, end = node.start_mark.index, node.end_mark.index
    if start == end:  # `title:` with nothing after it
        sp.put(start, end, " " + render_scalar(value))
    elif node.style in ("|", ">"):
        sp.put(start, end, render_scalar(value) + "\n")
    else:
        sp.put(start, end, render_scalar(value, node.style))


def _edit_tags(sp: _Splices, root: MappingNode | None, edit: TagEdit) -> bool:
    """Splice the retag into ``tags`` in its own form; whether anything changed."""
    node = _value_node(root, "tags")
    text = sp.text
    if node is None or (isinstance(node, ScalarNode) and node.tag.endswith(":null")):
        new = merge_tags([], edit)
        if new is None:
            return False
        shown = list_value(new, edit.style)
        if node is None:
            sep = "" if not text or text.endswith("\n") else "\n"
            sp.put(len(text), len(text), f"{sep}tags:{shown}\n")
        else:
            start, end = node.start_mark.index, node.end_mark.index
            sp.put(start, end, shown if start == end or edit.style == "block" else shown[1:])
        return True
    if isinstance(node, ScalarNode):
        raw = node.value
        # Every word of the string is kept as written ("2024" too); only replaced
        # tags give way, so "finance investing" never becomes "finance, finance investing".
        parts = [p for p in _TAG_SEPARATORS.split(raw) if p]
        plan = _tag_plan([p.lstrip("#") for p in parts], edit)
        if plan.at is None and not plan.front:
            return False
        new = _applied(plan, parts)
        if new == parts:
            return False
        joined = (", " if "," in raw else " ").join(new)
        start, end = node.start_mark.index, node.end_mark.index
        style = node.style if node.style in ("'", '"') else None
        sp.put(start, end, render_scalar(joined, style))
        return True
    if not isinstance(node, SequenceNode):
        return False  # a mapping under tags is the user's business: left alone
    items = [n for n in node.value if isinstance(n, ScalarNode)]
    values = [n.value.strip().lstrip("#") for n in items]
    if merge_tags(values, edit) is None:
        return False
    plan = _tag_plan(values, edit)
    if node.flow_style:
        _splice_flow(sp, node, items, plan)
    else:
        _splice_block(sp, items, plan)
    return True


def _splice_flow(sp: _Splices, node: SequenceNode, items: list[ScalarNode], plan: _TagPlan) -> None:
    text = sp.text
    delete = set(plan.delete) | ({plan.at} if plan.at is not None and not plan.new else set())
    if plan.front:
        shown = ", ".join(render_scalar(v, flow=True) for v in plan.front)
        if items:
            sp.put(items[0].start_mark.index, items[0].start_mark.index, shown + ", ")
        else:
            at = node.start_mark.index + 1
            sp.put(at, at, shown)
    for i, item in enumerate(items):
        start, end = item.start_mark.index, item.end_mark.index
        if i == plan.at and plan.new:
            shown = ", ".join(render_scalar(v, item.style, flow=True) for v in plan.new)
            sp.put(start, end, shown)
        elif i in delete:
            # The item and its comma go; a comment or line break beside it stays.
            if i + 1 < len(items):
                comma = _next_comma(text, end, items[i + 1].start_mark.index)
                stop = comma + 1
                while stop < len(text) and text[stop] == " ":
                    stop += 1
                sp.put(start, stop, "")
            elif i > 0 and i - 1 not in delete:
                before = _next_comma(text, items[i - 1].end_mark.index, start)
                sp.put(before, before + 1, "")
                sp.put(start, end, "")
            else:  # after a deleted item (its comma went with it): "[a, ]" is still a list
                sp.put(start, end, "")


def _next_comma(text: str, pos: int, limit: int) -> int:
    """The first ``,`` in ``text[pos:limit]`` outside a ``# comment`` (the separator
    between two flow items), or FrontMatterEditError."""
    in_comment = False
    for i in range(pos, limit):
        ch = text[i]
        if ch == "\n":
            in_comment = False
        elif ch == "#" and (i == 0 or text[i - 1] in " \t\n"):
            in_comment = True
        elif ch == "," and not in_comment:
            return i
    raise FrontMatterEditError("front matter cannot be edited in place (no comma found)")


def _splice_block(sp: _Splices, items: list[ScalarNode], plan: _TagPlan) -> None:
    text = sp.text
    if not items:
        return

    def line_for(item: ScalarNode, value: str) -> str:
        prefix = text[_line_start(text, item.start_mark.index) : item.start_mark.index]
        return prefix + render_scalar(value) + "\n"

    if plan.front:
        at = _line_start(text, items[0].start_mark.index)
        sp.put(at, at, "".join(line_for(items[0], v) for v in plan.front))
    for i, item in enumerate(items):
        start, end = item.start_mark.index, item.end_mark.index
        if i == plan.at and plan.new:
            sp.put(start, end, render_scalar(plan.new[0], item.style))
            after = _line_end(text, end)
            sp.put(after, after, "".join(line_for(item, v) for v in plan.new[1:]))
        elif i in plan.delete or i == plan.at:
            # The tag's line goes; a comment on it stays, on its own line.
            line_end = _line_end(text, end)
            rest = text[end:line_end]
            hash_at = rest.find("#")
            kept = ""
            if hash_at != -1:
                indent = text[_line_start(text, start) : start]
                kept = " " * (len(indent) - len(indent.lstrip(" "))) + rest[hash_at:]
                kept += "" if kept.endswith("\n") else "\n"
            sp.put(_line_start(text, start), line_end, kept)


# ---------------------------------------------------------------- the edit


def edit_block(
    inner: str,
    *,
    set_values: Mapping[str, str] | None = None,
    retag: TagEdit | None = None,
    set_topic: bool = True,
) -> str:
    """The block's text (between the ``---`` lines, ``\\n`` endings) with the edits.

    ``set_values`` sets text keys (new keys go last); ``retag`` edits ``tags`` in
    its form and, with ``set_topic`` (or when the block has a ``topic`` already),
    sets ``topic`` to the first topic. Returns ``inner`` unchanged when nothing
    changes; raises FrontMatterEditError (FrontMatterAliasError) when it cannot.
    """
    try:
        if yaml_events_use_aliases(inner):
            raise FrontMatterAliasError(
                "front matter uses YAML anchors, aliases or merge keys (&, *, <<): "
                "toolwire does not edit through them; change this note by hand"
            )
        root = _root(inner)
        before = load_front_matter(inner) or {}
    except (yaml.YAMLError, FrontMatterRefused) as exc:
        raise FrontMatterEditError(f"front matter cannot be edited in place: {exc}") from None
    values = {k: v for k, v in (set_values or {}).items() if before.get(k) != v or k not in before}
    sp = _Splices(inner)
    touched_tags = retag is not None and _edit_tags(sp, root, retag)
    if retag is not None and retag.topics and (set_topic or "topic" in before):
        if before.get("topic") != retag.topics[0]:
            values["topic"] = retag.topics[0]
    for key, value in values.items():
        _set_scalar(sp, root, key, value)
    if not sp.edits:
        return inner
    out = sp.result()
    _verify(before, out, values, retag if touched_tags else None)
    return out


def _verify(before: dict[str, Any], out: str, values: Mapping[str, str], retag: Any) -> None:
    """Read the edited block back: every other key as before, the edited ones as asked."""
    try:
        after = load_front_matter(out) or {}
    except (yaml.YAMLError, FrontMatterRefused):
        after = None
    expected = dict(before)
    expected.update(values)
    if not isinstance(after, dict):
        raise FrontMatterEditError("front matter cannot be edited in place (it would not read)")
    ok = True
    if retag is not None:
        want = merge_tags(front_matter_tags(before.get("tags")), retag)
        ok = front_matter_tags(after.get("tags")) == want
        expected["tags"] = after.get("tags")
    if not ok or after != expected:
        raise FrontMatterEditError(
            "front matter cannot be edited in place without changing other values"
        )


def topics_to_replace(taxonomy: Collection[str], old_topic: Any) -> frozenset[str]:
    """The tags a retag replaces: the taxonomy's topics and the old ``topic`` (by case)."""
    names = {str(t).casefold() for t in taxonomy}
    if isinstance(old_topic, str) and old_topic.strip():
        names.add(old_topic.strip().casefold())
    return frozenset(names)
