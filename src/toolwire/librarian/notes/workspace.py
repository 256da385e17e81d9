"""The notes workspace: markdown files with optional YAML front matter, read safely.

A workspace is a folder; its notes are the ``*.md`` files the spec's ``notes``
globs include (``notes.files``: not templates, daily notes, drawings...), front
matter read by ``frontmatter_load``, tags in every form by ``tags``. Reading never
crashes on a bad file: undecodable files, symlinks that leave the folder and
special files (fifos, devices) are skipped with a warning in
``Workspace.warnings``. Paths coming from a model go through
:func:`resolve_inside`, the one gate between untrusted text and the file system.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from toolwire.errors import WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import (
    CONTROL_CHARS,
    RESERVED_DIRS,
    casefold_key,
    normalize_rel_path,
    resolve_inside,
)
from toolwire.librarian.notes.conventions import Conventions, NoteSample, detect_conventions
from toolwire.librarian.notes.fields import MAX_TITLE_CHARS, scalar_text, tags_of, title_of
from toolwire.librarian.notes.files import (
    NoteFiles,
    read_note_file,
    walk_note_files,
)
from toolwire.librarian.notes.frontmatter_load import FrontMatterRefused, load_front_matter
from toolwire.librarian.notes.links import scan_links, strip_links
from toolwire.librarian.notes.owned_block import strip_blocks
from toolwire.librarian.notes.tags import carried_topic, inline_tags
from toolwire.spec.model import NotesSpec

__all__ = [
    "RESERVED_DIRS",
    "MAX_TITLE_CHARS",
    "FrontMatter",
    "Conventions",
    "Note",
    "Workspace",
    "casefold_key",
    "extract_links",
    "link_targets",
    "newline_of",
    "normalize_rel_path",
    "note_sample",
    "parse_note",
    "path_id",
    "resolve_inside",
    "sha256_hex",
    "split_front_matter",
    "strip_links",
    "unusable_note",
]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data`` (the hash every outcome and journal entry records)."""
    return hashlib.sha256(data).hexdigest()


def newline_of(text: str) -> str:
    """The file's line-ending style: ``\\r\\n`` when most lines end that way, else ``\\n``."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """A note's text split at its front matter block, byte-preserving.

    ``bom + block + body`` is the original text. ``data`` is ``None`` when the
    file has no usable block; ``error`` says why a block that looked like front
    matter was not usable (then ``block`` is empty and ``body`` is everything).
    ``refused`` is set when the block is unsafe to read (a recursive alias, an
    alias bomb): the note is skipped, not read as body (issue 30 item 3).
    """

    bom: str
    block: str
    data: dict[str, Any] | None
    body: str
    error: str | None = None
    refused: bool = False

    @property
    def present(self) -> bool:
        return self.data is not None


def split_front_matter(text: str) -> FrontMatter:
    """Split a leading ``---`` ... ``---`` YAML block off ``text`` (read by
    :func:`~toolwire.librarian.notes.frontmatter_load.load_front_matter`: bounded aliases,
    plain values kept as text, so ``title: no`` is the text "no")."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    rest = text[len(bom) :]
    lines = rest.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip(" \t") != "---":
        return FrontMatter(bom, "", None, rest)
    end = next(
        (i for i in range(1, len(lines)) if lines[i].rstrip("\r\n").rstrip(" \t") == "---"), None
    )
    if end is None:
        return FrontMatter(bom, "", None, rest, "front matter block is never closed by ---")
    try:
        data = load_front_matter("".join(lines[1:end]))
    except FrontMatterRefused as exc:
        return FrontMatter(bom, "", None, rest, f"front matter refused: {exc}", refused=True)
    except Exception as exc:  # untrusted YAML: any failure is a warning, never a crash
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return FrontMatter(bom, "", None, rest, f"front matter is not valid YAML ({first})")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return FrontMatter(bom, "", None, rest, "front matter is not a YAML mapping")
    block = "".join(lines[: end + 1])
    return FrontMatter(bom, block, data, rest[len(block) :])


def _link_target(raw: str) -> str | None:
    """A markdown link target if it points at another note (relative ``*.md``), else None."""
    target = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    if not target or target.startswith(("#", "/")) or _SCHEME.match(target):
        return None
    target = unquote(target.split("#", 1)[0].split("?", 1)[0])
    return target if target.lower().endswith(".md") else None


def _wiki_target(inner: str) -> str:
    return inner.split("|", 1)[0].split("#", 1)[0].strip()


def extract_links(body: str) -> tuple[str, ...]:
    """Targets of the links that name another note, in document order (``links.py``).

    Wiki targets lose their ``|alias`` and ``#heading``; markdown targets (inline
    or reference) lose their ``#fragment``/``?query`` and are percent-decoded.
    URLs with a scheme (http, mailto...), autolinks and in-page anchors are not
    note links; nothing inside code is a link.
    """
    found: list[str] = []
    for link in scan_links(body).links:
        target = _wiki_target(link.target) if link.kind == "wiki" else _link_target(link.target)
        if target:
            found.append(target)
    return tuple(found)


def link_targets(body: str) -> list[str]:
    """Every link target outside code, as written (URLs and autolinks too).

    Unlike :func:`extract_links` (note links only), this keeps what a link points
    at whatever it is, so a relink that adds ``[x](https://...)`` can be seen.
    """
    targets = []
    for link in scan_links(body).links:
        target = link.target.split("|", 1)[0].strip() if link.kind == "wiki" else link.target
        if target:
            targets.append(target)
    return targets


@dataclass(frozen=True)
class Note:
    """One markdown note as read from disk (``raw`` is the exact file bytes)."""

    note_id: str
    path: str  # posix, relative to the workspace root
    # front matter title (text only), else first "# H1", else "" (untitled); one line,
    # at most MAX_TITLE_CHARS: every consumer (scorer, requests, reports) gets it bounded.
    title: str
    # Every tag in the form-independent spelling ("cooking/bread", no "#"): front matter
    # tags (list or string), front matter topic, then inline #tags (``inline_tags``).
    tags: tuple[str, ...]
    topic: str | None
    front_matter: dict[str, Any]
    body: str
    raw: bytes
    sha256: str
    inline_tags: tuple[str, ...] = ()
    # Why the note must not be read at all (unsafe front matter), else None.
    refused: str | None = None

    @cached_property
    def links(self) -> tuple[str, ...]:
        """Targets of the links to other notes (:func:`extract_links`), read on first use:
        parsing markdown is most of what loading a workspace would otherwise cost."""
        return extract_links(self.body)

    def topic_among(self, topics: Sequence[str]) -> str | None:
        """The taxonomy topic the note carries now (front matter ``topic``, else the first
        tag that is one, inline or nested ``topic/sub`` too), or None (untagged)."""
        return carried_topic(self.topic, self.tags, topics)


def parse_note(path: str, raw: bytes) -> tuple[Note, str | None]:
    """Build a :class:`Note` from a file's bytes; returns it with a front-matter warning or None.

    Raises ``UnicodeDecodeError`` for bytes that are not UTF-8 (the caller decides
    whether that is a warning or an error).
    """
    text = raw.decode("utf-8")
    fm = split_front_matter(text)
    data = fm.data or {}
    topic = scalar_text(data.get("topic")) or None
    fm_id = data.get("id")
    note_id = scalar_text(fm_id) if isinstance(fm_id, str | int) else ""
    # toolwire's own blocks (related notes, indexes) are not the note's words
    body = strip_blocks(fm.body)
    body_tags = tuple(inline_tags(body))
    note = Note(
        note_id=note_id or path_id(path),
        path=path,
        title=title_of(data, body),
        tags=tags_of(data, body_tags),
        topic=topic,
        front_matter=dict(data),
        body=body,
        raw=raw,
        sha256=sha256_hex(raw),
        inline_tags=body_tags,
        refused=fm.error if fm.refused else None,
    )
    return note, fm.error


def note_sample(note: Note) -> NoteSample:
    """What convention detection reads of a note (its front matter text is what
    precedes the body)."""
    text = note.raw.decode("utf-8")
    block = text[: len(text) - len(note.body)] if note.front_matter else ""
    return NoteSample(note.front_matter, block, note.body, note.inline_tags)


def path_id(path: str) -> str:
    """The id of a note without a front matter ``id``: its path without ``.md``."""
    return path[:-3] if path.endswith(".md") else path


class Workspace:
    """A folder of notes, read once; ``notes`` maps note id -> Note, sorted by path.

    :meth:`with_file` returns an overlay (a new Workspace with one file's bytes
    replaced or added) so a plan of several operations can be checked in order
    without touching the disk. ``conventions``: how this vault writes titles and
    topics (read from its notes at load, what the spec states put over them).
    """

    def __init__(
        self,
        root: Path,
        notes: dict[str, Note],
        warnings: list[str] | None = None,
        files: NoteFiles | None = None,
        conventions: Conventions | None = None,
    ) -> None:
        self.root = root
        self.files = files or NoteFiles()
        self.notes = dict(sorted(notes.items(), key=lambda item: item[1].path))
        self.warnings = list(warnings or [])
        self._by_path = {note.path: note for note in self.notes.values()}
        self.conventions = conventions or detect_conventions(map(note_sample, self.notes.values()))

    @classmethod
    def load(
        cls, root: str | os.PathLike[str], files: NoteFiles | NotesSpec | None = None
    ) -> Workspace:
        """Read every note under ``root``; WorkspaceError if it is not a folder.

        ``files`` says which files are notes (the spec's ``notes`` globs; the
        defaults skip templates, daily notes, drawings and attachments): other files
        are not read at all.

        Files are found and read through :class:`~toolwire.files.confined.Confined`
        (folder descriptors, no link followed on the way). A file that cannot be a
        note is skipped, never fatal: each skip is one line in ``warnings``, which
        the run prints, reports and stores.
        """
        try:
            resolved = Path(root).resolve(strict=True)
        except (OSError, RuntimeError):
            raise WorkspaceError(f"workspace {root} does not exist") from None
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace {root} is not a directory")
        stated = None
        if isinstance(files, NotesSpec):
            stated = files.conventions
            files = NoteFiles(files.include, files.exclude)
        files = files or NoteFiles()
        warnings: list[str] = []
        notes: list[Note] = []
        with Confined(resolved) as fs:
            for rel in walk_note_files(fs, files, warnings):
                raw = read_note_file(fs, rel, warnings, files)
                if raw is None:
                    continue
                try:
                    note, fm_warning = parse_note(rel, raw)
                except UnicodeDecodeError as exc:
                    warnings.append(f"skipped {rel}: {_not_utf8(raw, exc)}")
                    continue
                problem = unusable_note(note)
                if problem:
                    warnings.append(f"skipped {rel}: {problem}")
                    continue
                if fm_warning:
                    warnings.append(f"{rel}: {fm_warning}; the whole file is read as the body")
                notes.append(note)
        by_id = _index_by_id(notes, warnings)
        conventions = detect_conventions(map(note_sample, by_id.values())).stated(stated)
        return cls(resolved, by_id, warnings, files, conventions)

    def note_at(self, path: str) -> Note | None:
        return self._by_path.get(path)

    def find_note(self, target: str) -> Note | None:
        """The note a model's target names: by id, else by path, else by path + ``.md``."""
        target = target.strip()
        return (
            self.notes.get(target) or self._by_path.get(target) or self._by_path.get(target + ".md")
        )

    def resolve_inside(self, rel: str) -> Path:
        """See :func:`resolve_inside`; raises PathOutsideWorkspace."""
        return resolve_inside(self.root, rel)

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` is taken: a note in this (overlay) view or anything on disk."""
        return rel in self._by_path or os.path.lexists(self.root / rel)

    def casefold_collision(self, rel: str) -> bool:
        """True if another existing path differs from ``rel`` only by case or Unicode form.

        Checks every component against the disk (files and folders) and every
        prefix against the notes of this view (which includes planned creates).
        """
        clean = normalize_rel_path(rel)
        parts = clean.split("/")
        known = {
            "/".join(p.split("/")[: i + 1]) for p in self._by_path for i in range(p.count("/") + 1)
        }
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            key = casefold_key(prefix)
            if any(k != prefix and casefold_key(k) == key for k in known):
                return True
        current = self.root
        for part in parts:
            try:
                names = os.listdir(current)
            except OSError:
                return False
            key = casefold_key(part)
            if any(n != part and casefold_key(n) == key for n in names):
                return True
            if part not in names:
                return False
            current = current / part
        return False

    def resolve_link(self, note: Note, target: str) -> str | None:
        """The id of the note a link in ``note`` points at, or None if it points nowhere."""
        if target.lower().endswith(".md"):
            base = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
            parts: list[str] = []
            for part in f"{base}/{target}".split("/"):
                if part == "..":
                    if not parts:
                        return None
                    parts.pop()
                elif part not in ("", "."):
                    parts.append(part)
            found = self._by_path.get("/".join(parts))
        else:
            found = self.find_note(target)
            if found is None:  # Obsidian-style: a bare name matches a file name anywhere
                stem = target.rsplit("/", 1)[-1]
                matches = [
                    n for p, n in self._by_path.items() if p.rsplit("/", 1)[-1] == stem + ".md"
                ]
                found = matches[0] if len(matches) == 1 else None
        return found.note_id if found else None

    def with_file(self, path: str, raw: bytes) -> Workspace:
        """A new view where the file at ``path`` holds ``raw`` (added if new)."""
        note, _ = parse_note(path, raw)
        notes = {nid: n for nid, n in self.notes.items() if n.path != path}
        clash = notes.get(note.note_id)
        prior = self._by_path.get(path)
        if clash is not None and prior is not None and prior.note_id == path_id(path):
            # The load read it under its path id (_index_by_id: another note holds its
            # front matter id); so does its new text. Refused, a review answer to a note
            # the user had duplicated failed after its write.
            note, clash = replace(note, note_id=prior.note_id), None
        if clash is not None:
            raise WorkspaceError(
                f"note id {note.note_id!r} would be used by both {clash.path} and {path}"
            )
        notes[note.note_id] = note
        return Workspace(self.root, notes, self.warnings, self.files, self.conventions)


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    """Why bytes are not a note's text: UTF-16 (Windows Notepad's "Unicode") said so."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (a byte order mark); toolwire reads UTF-8 notes, save it as UTF-8"
    return f"not valid UTF-8 (byte {exc.start})"


def unusable_note(note: Note) -> str | None:
    """Why a parsed note cannot be one (it would break every request), or None.

    Front matter is YAML, so a valid UTF-8 file can still hold ``"\\ud800"`` (a lone
    surrogate no request, store column or report can encode) or an ``id`` with a
    line break or control character (it becomes an XML field and a grammar
    literal). Such a note is skipped with a warning; the rest of the run goes on.
    """
    if note.refused:
        return note.refused
    if CONTROL_CHARS.search(note.note_id) or note.note_id != note.note_id.strip():
        return f"note id {note.note_id!r} contains a line break or control character"
    for label, value in (("title", note.title), ("id", note.note_id), *_fm_texts(note)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = value[exc.start]
            return f"front matter {label} holds U+{ord(bad):04X}, which is not a character"
    return None


def _fm_texts(note: Note) -> list[tuple[str, str]]:
    """Every string in the front matter (keys too), with the key it sits under."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("front matter", note.front_matter)]
    while stack:
        label, value = stack.pop()
        if isinstance(value, str):
            found.append((label, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                found.append(("key", str(key)))
                stack.append((str(key), item))
        elif isinstance(value, list | tuple):
            stack.extend((label, item) for item in value)
    return found


def _index_by_id(notes: list[Note], warnings: list[str]) -> dict[str, Note]:
    """Notes by id. A front matter ``id`` another note already has (issue 30 item 4)
    is not fatal: path ids are claimed first, then front matter ids in path order; a
    note whose ``id`` is taken falls back to its path id, or is skipped if that is
    taken too, each with a warning. One bad note never stops the run."""
    by_id: dict[str, Note] = {}
    own = [n for n in notes if n.note_id == path_id(n.path)]
    chosen = [n for n in notes if n.note_id != path_id(n.path)]
    for note in own:  # distinct: paths are
        by_id[note.note_id] = note
    for note in chosen:
        holder = by_id.get(note.note_id)
        if holder is None:
            by_id[note.note_id] = note
            continue
        fallback = path_id(note.path)
        if fallback in by_id:
            warnings.append(
                f"skipped {note.path}: its front matter id {note.note_id!r} is already "
                f"used by {holder.path}, and so is its path id {fallback!r}"
            )
            continue
        warnings.append(
            f"{note.path}: its front matter id {note.note_id!r} is already used by "
            f"{holder.path}; read under its path id {fallback!r}"
        )
        by_id[fallback] = replace(note, note_id=fallback)
    return by_id
