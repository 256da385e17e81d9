"""What each librarian operation does to a file: operation -> new file bytes.

Every kind keeps the rest of the file byte for byte: when front matter must
change, only the changed values are edited in place (frontmatter_edit: comments,
key order, quoting and list style kept; new keys last) and the body bytes are
kept exactly; new text takes the file's line-ending style. A change that
would be unsafe or does not follow its kind's contract raises
:class:`ChangeRejected` with a validation code; validation turns that into a
rejection, so a bad operation never reaches the disk.

Meaning of the operation fields per kind (the prompt packs say the same):

Titles and topics go where the vault keeps them (``Workspace.conventions``, issue 42).

- ``create_note``: ``target_path`` is a new workspace-relative path ending in
  ``.md`` (``target_note_id`` is accepted when ``target_path`` is empty);
  ``title`` goes where the vault keeps titles (a front matter block, a leading
  ``# H1``, or only the file name); ``body_markdown`` is the body.
- ``rewrite_note``: the body becomes ``body_markdown``; the front matter
  ``title`` is set, in a vault or note that keeps one, when the note has front
  matter or the title changed (an untitled note's placeholder title, its id, is
  not a change).
- ``retitle_note``: front matter ``title`` (and a leading ``# <old title>``) in a
  vault or note that keeps one, else the leading ``# H1``; refused
  (``TITLE_IS_FILE_NAME``) where file names are titles. ``body_markdown`` is
  ignored (``-``).
- ``relink_note``: ``body_markdown`` is the whole new body; only link targets
  and link text may differ from the old body, line by line (trailing spaces and
  line endings aside: a body flattened onto one line is refused).
- ``retag_note``: ``body_markdown`` lists topics, one per line (bullets and
  commas tolerated); the taxonomy topics are replaced by them where they stand
  (``tags``, inline ``#tags``, a ``topic:`` the note has); a note with none gets
  them as the vault writes topics; the user's other tags stay.
- ``defer``: no change.
- ``relate_note`` (planned by toolwire, ``reorganize.related``): ``body_markdown`` is
  the content of the note's ``related`` block (``owned_block``), which it replaces.
- ``index_topic`` (``reorganize.index``): the same for the ``index`` block of the
  index note at ``target_path``, created (topic ``title``) when there is none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.domain import Operation, parse_topics
from toolwire.errors import PathOutsideWorkspace, WorkspaceError
from toolwire.librarian.notes.conventions import Conventions
from toolwire.librarian.notes.fields import MAX_TITLE_CHARS
from toolwire.librarian.notes.frontmatter_edit import (
    FrontMatterEditError,
    TagEdit,
    edit_block,
    merge_tags,
    new_block,
    topics_to_replace,
)
from toolwire.librarian.notes.owned_block import set_block
from toolwire.librarian.notes.tags import carries, front_matter_tags, inline_tag_spans
from toolwire.librarian.notes.workspace import (
    FrontMatter,
    Note,
    Workspace,
    newline_of,
    normalize_rel_path,
    sha256_hex,
    split_front_matter,
    strip_links,
)

__all__ = [
    "MAX_TITLE_CHARS",
    "ChangeRejected",
    "FileChange",
    "check_title",
    "create_path_of",
    "diff_plan",
    "render_change",
    "render_changes",
]

# A path component longer than this fails on common file systems (bytes, UTF-8).
_MAX_NAME_BYTES = 255
_WINDOWS_RESERVED = frozenset(
    ("CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$")
    + tuple(f"{dev}{n}" for dev in ("COM", "LPT") for n in (*"123456789", "¹", "²", "³"))
)


class ChangeRejected(WorkspaceError):
    """An operation cannot be turned into a safe change; ``code`` is the validation code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file's planned bytes: ``old`` is None for a create."""

    path: str
    old: bytes | None
    new: bytes

    @property
    def old_sha256(self) -> str | None:
        return None if self.old is None else sha256_hex(self.old)

    @property
    def new_sha256(self) -> str:
        return sha256_hex(self.new)


def create_path_of(op: Operation) -> str:
    """The path a create_note names (``target_path``, else ``target_note_id``)."""
    return (op.target_path or op.target_note_id or "").strip()


# C0 and C1 controls (ESC among them), DEL and the bidi overrides and isolates.
_TITLE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def check_title(title: str, *, required: bool) -> str:
    """The stripped title, or ChangeRejected(INVALID_TITLE) if it cannot be a title."""
    clean = title.strip()
    if required and not clean:
        raise ChangeRejected("INVALID_TITLE", "the title is empty")
    if "\n" in clean or "\r" in clean:
        raise ChangeRejected("INVALID_TITLE", "the title spans several lines; give one line")
    bad = _TITLE_CONTROL.search(clean)
    if bad:  # an escape sequence in a title clears a screen or plants a link (issue 45 #13)
        raise ChangeRejected(
            "INVALID_TITLE", f"the title holds a control character (U+{ord(bad.group()):04X})"
        )
    if len(clean) > MAX_TITLE_CHARS:
        raise ChangeRejected("INVALID_TITLE", f"the title is longer than {MAX_TITLE_CHARS} chars")
    return clean


def _body_text(body_markdown: str, nl: str) -> str:
    """A model's body as file text: no leading/trailing blank lines, one final newline."""
    text = body_markdown.replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip()
    if not text:
        return ""
    text += "\n"
    return text.replace("\n", nl) if nl != "\n" else text


def _dump_block(data: dict[str, Any], nl: str, list_style: str = "flow") -> str:
    block = "---\n" + new_block(data, list_style) + "---\n"
    return block.replace("\n", nl) if nl != "\n" else block


def _compose(
    fm: FrontMatter,
    updates: dict[str, Any],
    body: str,
    nl: str,
    retag: TagEdit | None = None,
    set_topic: bool = True,
) -> str:
    """``body`` under the front matter with ``updates`` (and a retag) applied in place:
    the block keeps its comments, order, quoting and list style (frontmatter_edit)."""
    if not updates and retag is None:
        return fm.bom + fm.block + body
    if not fm.present:
        values = dict(updates)
        if retag is not None:  # a new block: the topics are the note's only tags
            tags = merge_tags([], retag)
            if tags:
                values["tags"] = tags
            if set_topic:
                values["topic"] = retag.topics[0]
        style = retag.style if retag is not None else "flow"
        return fm.bom + (_dump_block(values, nl, style) if values else "") + body
    lines = fm.block.splitlines(keepends=True)
    inner = "".join(lines[1:-1]).replace("\r\n", "\n")
    try:
        edited = edit_block(inner, set_values=updates, retag=retag, set_topic=set_topic)
    except FrontMatterEditError as exc:
        raise ChangeRejected(exc.code, f"{exc}") from None
    if edited == inner:
        return fm.bom + fm.block + body
    if nl != "\n":
        edited = edited.replace("\n", nl)
    return fm.bom + lines[0] + edited + lines[-1] + body


def _split_for_edit(note: Note) -> tuple[FrontMatter, str]:
    text = note.raw.decode("utf-8")
    fm = split_front_matter(text)
    if fm.error:
        raise ChangeRejected(
            "INVALID_FRONT_MATTER",
            f"{note.path}: {fm.error}; fix the front matter by hand before changing this note",
        )
    return fm, newline_of(text)


_H1_LINE = re.compile(r"^( {0,3}#[ \t]+)(.*?)((?:[ \t]+#+)?[ \t]*)$")


def _retitle_h1(body: str, old_title: str, new_title: str) -> str:
    """Update a leading ``# <old title>`` line (after blank lines) to the new title."""
    if not old_title:
        return body
    pos = 0
    for line in body.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        if content.strip():
            m = _H1_LINE.match(content)
            if m and m.group(2).strip() == old_title:
                start = pos + m.start(2)
                return body[:start] + new_title + body[pos + m.end(2) :]
            return body
        pos += len(line)
    return body


def _comparable(text: str) -> list[str]:
    """The text a relink may not change: every line without its links, trailing spaces
    and line-ending style (a flattened code block or table differs line by line)."""
    lines = strip_links(text).replace("\r\n", "\n").strip("\n").split("\n")
    return [line.rstrip() for line in lines]


def _check_create_path(ws: Workspace, rel: str) -> str:
    if not rel:
        raise ChangeRejected("INVALID_PATH", "create_note needs a target_path ending in .md")
    try:
        clean = normalize_rel_path(rel)
    except PathOutsideWorkspace as exc:
        raise ChangeRejected("PATH_OUTSIDE_WORKSPACE", exc.message) from None
    if not clean.endswith(".md"):
        raise ChangeRejected("INVALID_PATH", f"path {rel!r} must name a file ending in .md")
    if any(len(part.encode("utf-8")) > _MAX_NAME_BYTES for part in clean.split("/")):
        raise ChangeRejected("INVALID_PATH", f"path {rel!r} has a name over 255 bytes")
    for part in clean.split("/"):
        # Notes folders travel (git, sync tools) to Windows and macOS, where these
        # names cannot exist or silently become another name: never create one.
        if part.endswith((".", " ")):
            raise ChangeRejected("INVALID_PATH", f"path {rel!r}: {part!r} ends with a dot or space")
        if part.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_RESERVED:
            raise ChangeRejected(
                "INVALID_PATH", f"path {rel!r}: {part!r} is a reserved device name on Windows"
            )
    try:
        ws.resolve_inside(clean)
    except PathOutsideWorkspace as exc:
        raise ChangeRejected("PATH_OUTSIDE_WORKSPACE", exc.message) from None
    if not ws.files.is_note(clean):  # a template or daily-notes folder is not the model's
        raise ChangeRejected("INVALID_PATH", f"{clean} is excluded by the spec's notes globs")
    if ws.exists(clean):
        raise ChangeRejected("TARGET_EXISTS", f"{clean} already exists; choose a new path")
    derived_id = clean[:-3]
    if derived_id in ws.notes:
        raise ChangeRejected(
            "TARGET_EXISTS",
            f"note id {derived_id!r} is already used by {ws.notes[derived_id].path}",
        )
    if ws.casefold_collision(clean):
        raise ChangeRejected(
            "PATH_COLLISION",
            f"{clean} differs from an existing path only by letter case or accents",
        )
    return clean


def _render_create(ws: Workspace, op: Operation) -> FileChange:
    """A new note, its title where the vault keeps titles: a ``title:`` property, a
    leading ``# H1``, or only the file name (the path names it)."""
    path = _check_create_path(ws, create_path_of(op))
    title = check_title(op.title, required=False)
    body = _body_text(op.body_markdown, "\n")
    head = ""
    if title and ws.conventions.title == "property":
        head = _dump_block({"title": title}, "\n")
    elif title and ws.conventions.title == "h1" and not _leading_h1(body):
        head = f"# {title}\n\n"
    return FileChange(path, None, (head + body).encode("utf-8"))


def _leading_h1(body: str) -> bool:
    first = next((line for line in body.splitlines() if line.strip()), "")
    return bool(re.match(r"^ {0,3}#[ \t]+\S", first))


def _retitle(note: Note, fm: FrontMatter, nl: str, title: str, conv: Conventions) -> str:
    """A retitle where the vault keeps titles (conventions): the ``title:`` property when
    the vault or this note uses one (a leading ``# <old title>`` follows), else the
    leading ``# H1`` (added if there is none); a vault titled by file names refuses it."""
    has_property = "title" in (fm.data or {})
    if has_property or conv.title == "property":
        body = _retitle_h1(fm.body, note.title, title)
        return _compose(fm, {"title": title}, body, nl)
    if conv.title == "h1":
        if _leading_h1(fm.body):  # the leading heading is the title, whatever it says
            first = next(line for line in fm.body.splitlines() if line.strip())
            heading = _H1_LINE.match(first)
            body = _retitle_h1(fm.body, heading.group(2).strip() if heading else "", title)
        else:
            body = f"# {title}{nl}{nl}" + fm.body.lstrip("\r\n")
        return _compose(fm, {}, body, nl)
    raise ChangeRejected(
        "TITLE_IS_FILE_NAME",
        f"{note.path}: this vault titles notes by their file name and toolwire does not "
        "rename files; set notes.conventions.title in the spec to write titles",
    )


def _render_edit(note: Note, op: Operation, conv: Conventions, taxonomy: Sequence[str] = ()) -> str:
    fm, nl = _split_for_edit(note)
    if op.kind == "rewrite_note":
        title = check_title(op.title, required=False)
        placeholder = not note.title and title == note.note_id
        # A title property only where the vault (or this note) keeps one.
        keeps = conv.title == "property" or "title" in (fm.data or {})
        updates = {}
        if keeps and title and not placeholder and (fm.present or title != note.title):
            updates["title"] = title
        return _compose(fm, updates, _body_text(op.body_markdown, nl), nl)
    if op.kind == "retitle_note":
        return _retitle(note, fm, nl, check_title(op.title, required=True), conv)
    if op.kind == "relink_note":
        body = _body_text(op.body_markdown, nl)
        if _comparable(body) != _comparable(fm.body):
            raise ChangeRejected(
                "RELINK_CHANGES_TEXT",
                "relink_note may change only link targets and link text; other text differs",
            )
        # Keep the old body's leading blank lines and trailing whitespace: a relink
        # that changes no link leaves the file byte-identical.
        old = fm.body
        lead = old[: len(old) - len(old.lstrip("\r\n"))]
        tail = old[len(old.rstrip()) :]
        return _compose(fm, {}, lead + body.rstrip() + tail, nl)
    if op.kind in _OWNED_BLOCK:  # toolwire's own block (reorganize): nothing else changes
        return fm.bom + fm.block + set_block(fm.body, _OWNED_BLOCK[op.kind], op.body_markdown, nl)
    if op.kind == "retag_note":
        topics = parse_topics(op.body_markdown)
        if not topics:
            raise ChangeRejected("EMPTY_TOPICS", "retag_note lists no topic")
        return _render_retag(fm, nl, topics, taxonomy, conv)
    raise ChangeRejected("KIND_NOT_ALLOWED", f"unknown operation kind {op.kind!r}")


def _render_retag(
    fm: FrontMatter, nl: str, topics: list[str], taxonomy: Sequence[str], conv: Conventions
) -> str:
    """A retag in the form the note wrote its tags (README, "How the librarian reads a
    vault"): taxonomy tags are replaced where they stand (front matter list or
    string, inline ``#tag`` in the text); a note with none gets the topics where the
    vault puts them (conventions): front matter ``tags`` in the vault's list style,
    or an inline ``#tag`` line at the end, and ``topic:`` only in a vault that uses
    it. Nested tags stay: a note with ``cooking/bread`` already carries ``cooking``
    and never gets it beside it."""
    data = fm.data or {}
    # The new topics count as replaced too: one already in tags moves to the front.
    replaced = topics_to_replace([*taxonomy, *topics], data.get("topic"))
    spans = inline_tag_spans(fm.body)
    inline_hits = [(s, e) for s, e, tag in spans if tag.casefold() in replaced]
    inline_rest = [tag for _, _, tag in spans if tag.casefold() not in replaced]
    fm_tags = front_matter_tags(data.get("tags"))
    fm_hit = any(t.casefold() in replaced for t in fm_tags)
    fm_rest = [t for t in fm_tags if t.casefold() not in replaced]
    topic = [str(data["topic"])] if data.get("topic") else []
    every_tag = [*fm_tags, *topic, *(tag for _, _, tag in spans)]
    carried = {t.casefold() for t in [*taxonomy, *topics] if carries(every_tag, t)}
    if carried == {t.casefold() for t in topics}:
        return fm.bom + fm.block + fm.body  # it carries these topics and no other already
    body = fm.body
    if inline_hits:
        extra = [t for t in topics[1:] if not carries(inline_rest + fm_rest, t)]
        first = " ".join(f"#{t}" for t in [topics[0], *extra])
        for i, (start, end) in reversed(list(enumerate(inline_hits))):
            body = body[:start] + (first if i == 0 else f"#{topics[0]}") + body[end:]
    elif not fm_hit and conv.tags == "inline":
        # The vault tags in the text: one line of tags at the end; every byte before stays.
        new = [t for t in topics if not carries(inline_rest + fm_rest, t)]
        if new:
            sep = "" if not body or body.endswith("\n") else nl
            blank = nl if body.strip() and not body.endswith(nl + nl) else ""
            body += sep + blank + " ".join(f"#{t}" for t in new) + nl
    edit = TagEdit(
        topics=tuple(topics),
        replaced=replaced,
        carried=frozenset(t for t in topics if carries(inline_rest, t)),
        add=not inline_hits and conv.tags == "front_matter",
        style=conv.list_style,
    )
    set_topic = conv.topic_property and (fm_hit or not inline_hits)
    return _compose(fm, {}, body, nl, retag=edit, set_topic=set_topic)


# The block each reorganize kind owns (notes/owned_block.py).
_OWNED_BLOCK = {"relate_note": "related", "index_topic": "index"}


def _render_new_index(ws: Workspace, op: Operation) -> FileChange:
    """A new index note: its topic in front matter (filed already), a heading, the block."""
    path = _check_create_path(ws, op.target_path or "")
    topic = op.title
    head = _dump_block({"topic": topic}, "\n") + f"# {topic}\n\n"
    return FileChange(path, None, set_block(head, "index", op.body_markdown).encode("utf-8"))


def render_change(ws: Workspace, op: Operation, taxonomy: Sequence[str] = ()) -> FileChange | None:
    """The file change ``op`` makes in ``ws`` (None for ``defer``); raises ChangeRejected.

    ``taxonomy``: the spec's topics, which a retag replaces in ``tags`` (other tags stay).
    """
    if op.kind == "defer":
        return None
    if op.kind == "create_note":
        return _render_create(ws, op)
    if op.kind == "index_topic" and ws.note_at(op.target_path or "") is None:
        return _render_new_index(ws, op)
    note = ws.find_note(op.target)
    if note is None:
        raise ChangeRejected("TARGET_NOT_FOUND", f"no note with id or path {op.target!r}")
    try:
        ws.resolve_inside(note.path)
    except PathOutsideWorkspace as exc:
        raise ChangeRejected("PATH_OUTSIDE_WORKSPACE", exc.message) from None
    text = _render_edit(note, op, ws.conventions, taxonomy)
    return FileChange(note.path, note.raw, text.encode("utf-8"))


def render_changes(
    ws: Workspace, ops: Sequence[Operation], taxonomy: Sequence[str] = ()
) -> list[FileChange]:
    """Apply ``ops`` in order on an overlay of ``ws`` and return one change per file.

    Several operations on one note chain (each sees the previous result); the
    file's change runs from its bytes in ``ws`` to its last bytes. Files that
    end as they began are left out. Raises ChangeRejected if an operation
    fails (validation should have rejected it).
    """
    view = ws
    first_old: dict[str, bytes | None] = {}
    last_new: dict[str, bytes] = {}
    for op in ops:
        change = render_change(view, op, taxonomy)
        if change is None:
            continue
        first_old.setdefault(change.path, change.old)
        last_new[change.path] = change.new
        view = view.with_file(change.path, change.new)
    return [
        FileChange(path, old, last_new[path])
        for path, old in first_old.items()
        if old != last_new[path]
    ]


def diff_plan(changes: Sequence[FileChange]) -> str:
    """Unified diff of every change (``a/path`` -> ``b/path``; creates from /dev/null)."""
    out: list[str] = []
    for change in changes:
        old = "" if change.old is None else change.old.decode("utf-8", errors="replace")
        new = change.new.decode("utf-8", errors="replace")
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile="/dev/null" if change.old is None else f"a/{change.path}",
            tofile=f"b/{change.path}",
        )
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
