"""What a run changed, note by note, in words a person checks: old -> new, and what waits.

Computed from the file changes themselves (old bytes vs new bytes, each
parsed as a note), not from what the model said it would do, so the summary,
the markdown report, the HTML report and the ``note_changes`` table show what
was written (or, on a dry run, what would be).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from toolwire.domain import OperationOutcome
from toolwire.librarian.judge.scorer import NoteJudgement
from toolwire.librarian.notes.changes import FileChange
from toolwire.librarian.notes.workspace import Note, Workspace, parse_note

__all__ = [
    "DeferredNote",
    "FieldChange",
    "current_topic",
    "deferred_notes",
    "field_changes",
    "misfiled_warnings",
    "plan_lines",
]

# The fields a person looks at first; a body-only edit shows as "body".
_FIELDS = ("topic", "title", "tags")


@dataclass(frozen=True, slots=True)
class FieldChange:
    path: str
    field: str  # topic | title | tags | body | note (created)
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class DeferredNote:
    path: str
    candidates: str  # "databases 0.62, cooking 0.20": best first, calibrated confidence
    why: str


def _note(path: str, raw: bytes | None) -> Note | None:
    if raw is None:
        return None
    try:
        note, _ = parse_note(path, raw)
    except UnicodeDecodeError:
        return None
    return note


def current_topic(note: Note, topics: Sequence[str]) -> str | None:
    """The taxonomy topic a note has now: front matter ``topic``, else its first tag
    that is a taxonomy topic (inline ``#tags`` and nested ``topic/sub`` count)."""
    return note.topic_among(topics)


def field_changes(changes: Iterable[FileChange], topics: Sequence[str]) -> list[FieldChange]:
    """One row per changed field of every changed file, in file order; ``topic`` is the
    taxonomy topic (front matter ``topic``, else the first taxonomy tag)."""

    def _value(note: Note, field: str) -> str:
        if field == "tags":
            return ", ".join(note.tags)
        if field == "topic":
            return current_topic(note, topics) or ""
        if field == "body":  # the diff has the text; here only its size
            return f"{len(note.body.splitlines())} lines"
        return str(getattr(note, field) or "")

    rows: list[FieldChange] = []
    for change in changes:
        old, new = _note(change.path, change.old), _note(change.path, change.new)
        if new is None:
            continue
        if old is None:
            rows.append(FieldChange(change.path, "note", "", new.title or change.path))
            continue
        fields = [f for f in _FIELDS if _value(old, f) != _value(new, f)]
        if not fields and old.body != new.body:
            fields = ["body"]
        rows += [FieldChange(change.path, f, _value(old, f), _value(new, f)) for f in fields]
    return rows


def deferred_notes(
    workspace: Workspace | None,
    outcomes: Sequence[OperationOutcome],
    judgements: Mapping[str, NoteJudgement],
    *,
    shown: int = 3,
) -> list[DeferredNote]:
    """Every deferred note with its best candidates and the reason it waits."""
    rows = []
    for outcome in outcomes:
        if outcome.status != "deferred" or outcome.code == "MAX_CHANGES":
            continue  # held over the cap: one warning line says how many, not one each
        op = outcome.operation
        note = workspace.find_note(op.target) if workspace is not None else None
        path = note.path if note is not None else op.target
        judgement = judgements.get(note.note_id if note is not None else op.target)
        if judgement is not None:
            candidates = ", ".join(
                f"{c.topic} {c.confidence:.2f}" for c in judgement.candidates[:shown]
            )
            why = judgement.why
        else:
            candidates, why = "", outcome.detail or op.reason
        rows.append(DeferredNote(path, candidates, why))
    return rows


def misfiled_warnings(
    workspace: Workspace | None, judgements: Mapping[str, NoteJudgement], *, shown: int = 3
) -> list[str]:
    """One line counting the notes that keep a topic the scorer rates far below another
    (``NoteJudgement.misfiled``): the run never replaces a user's topic, so these are
    left to the user (``toolwire review``), and must not pass in silence."""
    flagged = [j for j in judgements.values() if j.decision == "keep" and j.misfiled]
    if not flagged:
        return []
    paths = {n.note_id: n.path for n in workspace.notes.values()} if workspace else {}
    rows = sorted(
        f"{paths.get(j.note_id, j.note_id)} ({j.current} -> {j.best.topic} {j.best.confidence:.2f})"
        for j in flagged
    )
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return [
        f"{len(rows)} note(s) keep a topic the scorer rates far below another, left as the "
        f"user filed them: {', '.join(rows[:shown])}{more} (toolwire review asks about them)"
    ]


def plan_lines(
    outcomes: Sequence[OperationOutcome],
    changes: Sequence[FieldChange],
    conventions: str,
    *,
    folders: int = 6,
    sample: int = 5,
) -> list[str]:
    """The run's plan on one screen (issue 42: a first dry run printed ~3,900 lines and no
    summary): notes to change per kind and folder, what waits, how the vault's titles and
    topics are written, and a short sample of old -> new."""
    done = [o for o in outcomes if o.status in ("planned", "applied")]
    changed = list(dict.fromkeys(c.path for c in changes))
    kinds = Counter(o.operation.kind for o in done if o.path in set(changed or ()))
    deferred = sum(o.status == "deferred" and o.code != "MAX_CHANGES" for o in outcomes)
    # Notes held over constraints.max_changes are counted in the run's warning line.
    rejected = sum(o.status == "rejected" for o in outcomes)
    by_folder = Counter(p.rsplit("/", 1)[0] if "/" in p else "(top)" for p in changed)
    head = f"plan: {len(changed)} note(s) to change"
    if kinds:
        head += " (" + ", ".join(f"{n} {k}" for k, n in kinds.most_common()) + ")"
    head += f" in {len(by_folder)} folder(s)"
    rest = [f"{n} {what}" for n, what in ((deferred, "deferred"), (rejected, "rejected")) if n]
    lines = [head + ("; " + ", ".join(rest) if rest else "")]
    if by_folder:
        top = by_folder.most_common(folders)
        more = len(by_folder) - len(top)
        lines.append(
            "  folders: "
            + ", ".join(f"{f} {n}" for f, n in top)
            + (f" and {more} more" if more else "")
        )
    if conventions:
        lines.append(f"  conventions: {conventions}")
    first = set(changed[:sample])
    shown = [c for c in changes if c.path in first]
    if shown:
        lines.append("  for example:")
        lines += [f"    {c.path}: {c.field} {c.old or '-'} -> {c.new or '-'}" for c in shown]
    return lines
