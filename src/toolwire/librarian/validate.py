"""Check a librarian's proposed operations against the spec's constraints and the workspace.

Every operation gets exactly one outcome, in order; a bad operation is a
rejection with a code and a human reason, never an exception. Checks, first
failure wins:

1. ``MAX_OPERATIONS_EXCEEDED``: the operation is beyond ``max_operations``,
   counted over the whole run (``ops_so_far`` operations came before).
2. ``defer`` -> ``deferred`` / ``DEFERRED_BY_MODEL``, or ``DEFERRED_BY_SCORER`` when
   the system planned the operations (``planned_by="scorer"``: a templated turn, where
   the model fills slots and every defer is the scorer's "not sure enough"). A defer
   changes nothing, so strict fallback and ``allowed_kinds`` do not reject it.
3. ``STRICT_FALLBACK_KIND``: strict fallback accepts only create_note and rewrite_note.
4. ``KIND_NOT_ALLOWED``: the kind is unknown or not in ``allowed_kinds``.
5. Strict mode: non-create operations must name ``target_note_id``
   (``TARGET_NOT_FOUND`` otherwise), create_note must name ``target_path``
   (``INVALID_PATH``). Outside strict mode a target may be an id or a path.
6. Content rules: ``INVALID_TITLE`` (retitle with an empty or multi-line title;
   any multi-line or over-long title), ``EMPTY_TOPICS`` and ``UNKNOWN_TOPIC:<t>``
   (retag; topics must be spelled exactly as in the taxonomy),
   ``EMPTY_REWRITE`` (rewrite/relink emptying a note without ``allow_delete``),
   ``EMPTY_BODY`` (create_note with no body).
7. The change itself (:mod:`toolwire.librarian.notes.changes`): ``TARGET_NOT_FOUND``,
   ``TARGET_EXISTS``, ``PATH_OUTSIDE_WORKSPACE``, ``PATH_COLLISION``,
   ``INVALID_PATH``, ``RELINK_CHANGES_TEXT``, ``INVALID_FRONT_MATTER``,
   ``DUPLICATE_NOTE_ID``; and ``RELINK_EXTERNAL_LINK``: a relink may add links
   to notes of the workspace only (or in-page ``#anchors``), unless the spec's
   ``constraints.allow_external_links`` is on. A model must not be able to
   plant ``[docs](https://attacker.example)`` in a user's notes.
8. ``confidence < min_confidence`` -> ``deferred`` / ``LOW_CONFIDENCE`` (with the
   change it would have made, for a person to review).
9. Otherwise ``planned`` with ``path``, ``before_sha256``, ``after_sha256``.

Several operations on one note are checked in order, each against the result
of the planned ones before it (an overlay, nothing is written): a retitle then
a relink whose body still has the old heading is a ``RELINK_CHANGES_TEXT``.
This is the same chaining :func:`~toolwire.librarian.notes.changes.render_changes`
does at apply time, so the planned hashes are the applied ones.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Literal
from urllib.parse import unquote

from toolwire.domain import (
    OPERATION_KINDS,
    LibrarianResponse,
    Operation,
    OperationOutcome,
    parse_topics,
)
from toolwire.errors import WorkspaceError
from toolwire.librarian.notes.changes import (
    ChangeRejected,
    FileChange,
    check_title,
    render_change,
)
from toolwire.librarian.notes.relink_labels import unearned_label
from toolwire.librarian.notes.workspace import (
    Note,
    Workspace,
    link_targets,
    parse_note,
    split_front_matter,
)
from toolwire.spec.model import Constraints

__all__ = ["STRICT_FALLBACK_KINDS", "validate_operations"]

STRICT_FALLBACK_KINDS = ("create_note", "rewrite_note")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # http:, mailto:, file:, javascript:...


class _Reject(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _policy_checks(op: Operation, constraints: Constraints, topics: Sequence[str]) -> None:
    """Steps 3-6 of the module docstring; raises _Reject."""
    kind = op.kind
    if constraints.strict_fallback and kind not in STRICT_FALLBACK_KINDS:
        raise _Reject(
            "STRICT_FALLBACK_KIND",
            f"strict fallback mode accepts only create_note and rewrite_note, not {kind}",
        )
    if kind not in OPERATION_KINDS or kind not in constraints.allowed_kinds:
        raise _Reject("KIND_NOT_ALLOWED", f"kind {kind!r} is not allowed by the spec")
    if constraints.strict_mode:
        if kind == "create_note" and not (op.target_path or "").strip():
            raise _Reject("INVALID_PATH", "strict mode: create_note names its file in target_path")
        if kind != "create_note" and not (op.target_note_id or "").strip():
            raise _Reject("TARGET_NOT_FOUND", f"strict mode: {kind} needs a target_note_id")
    try:
        check_title(op.title, required=kind == "retitle_note")
    except ChangeRejected as exc:
        raise _Reject(exc.code, exc.message) from None
    if kind == "retag_note":
        wanted = parse_topics(op.body_markdown)
        if not wanted:
            raise _Reject("EMPTY_TOPICS", "retag_note lists no topic; give one per line")
        unknown = [t for t in wanted if t not in topics]
        if unknown:
            raise _Reject(
                f"UNKNOWN_TOPIC:{unknown[0]}",
                f"topic(s) {', '.join(unknown)} not in the taxonomy ({', '.join(topics)})",
            )
    empty = not op.body_markdown.strip()
    if kind in ("rewrite_note", "relink_note") and empty:
        if not constraints.allow_delete:
            raise _Reject("EMPTY_REWRITE", f"{kind} would empty the note and allow_delete is off")
    if kind == "create_note" and empty:
        raise _Reject("EMPTY_BODY", "create_note has an empty body")


def _render(view: Workspace, op: Operation) -> FileChange:
    try:
        change = render_change(view, op)
    except ChangeRejected as exc:
        raise _Reject(exc.code, exc.message) from None
    if change is None:  # only defer renders to None, and defer is handled before
        raise _Reject("DEFERRED_BY_MODEL", "defer changes nothing")
    return change


def _check_added_links(
    view: Workspace, op: Operation, change: FileChange, constraints: Constraints
) -> None:
    """Step 7's ``RELINK_EXTERNAL_LINK``: every link a relink adds must name a note."""
    if op.kind != "relink_note" or constraints.allow_external_links:
        return
    note = view.note_at(change.path)
    if note is None:
        return
    old = link_targets(split_front_matter(note.raw.decode("utf-8")).body)
    new = link_targets(split_front_matter(change.new.decode("utf-8")).body)
    for target in (Counter(new) - Counter(old)).elements():
        if target.startswith("#") or _names_a_note(view, note, target):
            continue  # an anchor in the note itself, or another note of the workspace
        raise _Reject(
            "RELINK_EXTERNAL_LINK",
            f"relink adds a link to {target[:200]!r}, which is not a note of the workspace "
            "(constraints.allow_external_links is off)",
        )


def _check_link_labels(view: Workspace, op: Operation, change: FileChange) -> None:
    """A relink adds links, not prose: what an added link shows is its target's name
    (``toolwire.librarian.notes.relink_labels``, issue #30 item 10)."""
    if op.kind != "relink_note":
        return
    note = view.note_at(change.path)
    if note is None:
        return
    old = split_front_matter(note.raw.decode("utf-8")).body
    new = split_front_matter(change.new.decode("utf-8")).body
    text = unearned_label(old, new, lambda target: _target_names(view, note, target))
    if text is not None:
        raise _Reject(
            "RELINK_CHANGES_TEXT",
            f"relink shows new text in a link: {text[:120]!r}; a link's label, alias or "
            "title may only be its target's title or name, or text the note already had",
        )


def _target_names(view: Workspace, note: Note, target: str) -> list[str]:
    """What a link to ``target`` may show: the note's title, id and file name; for an
    ``#anchor`` the heading's words."""
    path, _, anchor = target.split("|", 1)[0].partition("#")
    names = [anchor, anchor.replace("-", " ")] if anchor else []
    path = unquote(path).strip()
    if not path:
        return names
    if _SCHEME.match(path):  # an external link the spec allows: its address names it
        return [*names, path, path.split(":", 1)[1].lstrip("/").split("/", 1)[0]]
    found_id = view.resolve_link(note, path)
    found = view.notes.get(found_id) if found_id else view.find_note(path)
    if found is None:
        return names
    file_name = found.path.rsplit("/", 1)[-1]
    return [*names, found.title, found.note_id, found.path, file_name, file_name[:-3]]


def _names_a_note(view: Workspace, note: Note, target: str) -> bool:
    """Whether a link target names a note: relative to ``note`` (as the loader reads
    links) or from the workspace top (as Obsidian's vault-absolute links do)."""
    if view.resolve_link(note, target) is not None:
        return True
    path = unquote(target.split("#", 1)[0]).strip()
    return not _SCHEME.match(path) and bool(path) and view.find_note(path) is not None


def _note_in(view: Workspace, path: str, raw: bytes) -> Note:
    """The note ``raw`` makes at ``path``; WorkspaceError as ``with_file`` if its id clashes."""
    note, _ = parse_note(path, raw)
    clash = view.notes.get(note.note_id)
    if clash is not None and clash.path != path:
        raise WorkspaceError(
            f"note id {note.note_id!r} would be used by both {clash.path} and {path}"
        )
    return note


def _put_note(view: Workspace, path: str, note: Note) -> None:
    """``view.with_file`` written into ``view`` itself (its caller's own copy)."""
    old = view.note_at(path)
    if old is not None:
        del view.notes[old.note_id]
    view.notes[note.note_id] = note
    view._by_path[path] = note  # the in-place twin of Workspace.with_file


def planned_view(ws: Workspace, outcomes: Sequence[OperationOutcome]) -> Workspace:
    """``ws`` as it will be once the planned (or applied) ``outcomes`` are written."""
    view = ws
    for earlier in outcomes:
        if earlier.status in ("planned", "applied"):
            try:
                change = render_change(view, earlier.operation)
                if change is not None:
                    view = view.with_file(change.path, change.new)
            except WorkspaceError:
                continue  # validated against the same chain, so unexpected; never raise here
    return view


def validate_operations(
    response: LibrarianResponse | Sequence[Operation],
    ws: Workspace,
    *,
    turn: int,
    constraints: Constraints,
    topics: Sequence[str],
    ops_so_far: int = 0,
    seq_start: int = 0,
    prior: Sequence[OperationOutcome] = (),
    in_place: bool = False,
    planned_by: Literal["model", "scorer"] = "model",
) -> list[OperationOutcome]:
    """One outcome per operation of ``response`` (see the module docstring for the rules).

    ``constraints`` are the spec's, typed: a renamed field fails type checks instead of
    silently turning its rule off. ``prior`` are outcomes of earlier turns of the run:
    their planned operations are replayed first, so this turn sees their effect (a
    create in turn 1 makes the same path TARGET_EXISTS in turn 2).
    A caller validating turn after turn keeps that view itself (:func:`planned_view`
    of each turn's outcomes) and passes it as ``ws`` with no ``prior``: replaying
    every earlier turn on every turn costs O(turns^2). ``in_place``: ``ws`` is the
    caller's own copy, and each planned change is written into it (no copy of the
    workspace per change: a turn costs its own operations).
    """
    ops = response.operations if isinstance(response, LibrarianResponse) else tuple(response)
    view = planned_view(ws, prior)

    max_ops = constraints.max_operations
    min_conf = constraints.min_confidence
    outcomes: list[OperationOutcome] = []
    for i, op in enumerate(ops):
        seq = seq_start + i
        if ops_so_far + i >= max_ops:
            outcomes.append(
                OperationOutcome(
                    turn, seq, op, "rejected", "MAX_OPERATIONS_EXCEEDED",
                    f"operation {ops_so_far + i + 1} is beyond max_operations={max_ops}",
                )
            )  # fmt: skip
            continue
        if op.kind == "defer":
            note = view.find_note(op.target) if op.target else None
            code = "DEFERRED_BY_SCORER" if planned_by == "scorer" else "DEFERRED_BY_MODEL"
            outcomes.append(
                OperationOutcome(
                    turn, seq, op, "deferred", code,
                    op.reason or f"the {planned_by} deferred this note to a person",
                    path=note.path if note else None,
                )
            )  # fmt: skip
            continue
        try:
            _policy_checks(op, constraints, topics)
            change = _render(view, op)
            _check_added_links(view, op, change, constraints)
            _check_link_labels(view, op, change)
            if in_place:  # checked now, written into ``view`` once planned
                after_note = _note_in(view, change.path, change.new)
            else:
                after_view = view.with_file(change.path, change.new)
        except _Reject as rej:
            outcomes.append(OperationOutcome(turn, seq, op, "rejected", rej.code, rej.detail))
            continue
        except WorkspaceError as exc:  # with_file: the change would duplicate a note id
            outcomes.append(
                OperationOutcome(turn, seq, op, "rejected", "DUPLICATE_NOTE_ID", exc.message)
            )
            continue
        hashes = dict(
            path=change.path, before_sha256=change.old_sha256, after_sha256=change.new_sha256
        )
        if not op.confidence >= min_conf:  # also catches NaN
            outcomes.append(
                OperationOutcome(
                    turn, seq, op, "deferred", "LOW_CONFIDENCE",
                    f"confidence {op.confidence} is below min_confidence={min_conf}",
                    **hashes,
                )
            )  # fmt: skip
            continue
        detail = None if change.old != change.new else "no change: the note is already so"
        outcomes.append(OperationOutcome(turn, seq, op, "planned", None, detail, **hashes))
        if in_place:
            _put_note(view, change.path, after_note)
        else:
            view = after_view
    return outcomes
