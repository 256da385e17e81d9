"""The reorganize step of a librarian run: after the model's (or scorer's) turns and
before apply, toolwire plans its own operations from the notes as the run will leave
them (``planned_view``), so they are validated, applied, journaled and stored like the
others.

Incremental by construction: every input is cheap to recompute (cached embeddings,
links, topics), and an operation is planned only where a note's block would change.
An unchanged vault plans nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolwire.domain import Operation, OperationOutcome
from toolwire.embedder import Embedder
from toolwire.librarian.context import RunContext
from toolwire.librarian.judge.lexical import note_terms, tfidf_rows
from toolwire.librarian.judge.scorer import load_embedder
from toolwire.librarian.judge.text import note_chunks
from toolwire.librarian.notes.changes import ChangeRejected, render_change
from toolwire.librarian.notes.links import scan_links
from toolwire.librarian.notes.workspace import Note, Workspace, unusable_note
from toolwire.librarian.reorganize.link_text import LinkNamer, vault_link_style
from toolwire.librarian.reorganize.related import rank_related
from toolwire.librarian.summary import current_topic
from toolwire.librarian.validate import planned_view
from toolwire.spec.model import Judgement, RelatedNotes

__all__ = ["RELATED_HEADING", "note_vectors", "plan_reorganize", "related_blocks"]

RELATED_HEADING = "**Related notes**"


def note_vectors(embedder: Embedder | None, notes: Sequence[Note]) -> np.ndarray:
    """One vector per note: the scorer's texts (so the store's cache already holds them),
    chunk vectors summed with the first counted twice; TF-IDF rows without an embedder."""
    if embedder is None:
        return tfidf_rows([note_terms(n.title, n.path, n.body) for n in notes]).toarray()
    chunks = [note_chunks(n.title, n.path, n.body) for n in notes]
    flat = [text for texts in chunks for text in texts]
    vectors = np.asarray(embedder.embed_notes(flat), dtype=np.float64)
    out, start = np.empty((len(notes), vectors.shape[1])), 0
    for i, texts in enumerate(chunks):
        own = vectors[start : start + len(texts)]
        out[i] = own.sum(axis=0) + own[0]
        start += len(texts)
    return out


def _link_style(notes: Sequence[Note], wanted: str) -> str:
    if wanted != "auto":
        return wanted
    kinds = [link.kind for n in notes for link in scan_links(n.body).links]
    return vault_link_style(kinds.count("wiki"), kinds.count("link"))


def related_blocks(
    view: Workspace,
    embedder: Embedder | None,
    topics: Sequence[str],
    spec: RelatedNotes,
) -> dict[str, str]:
    """Each note's ``related`` block content by path ("" when it has none)."""
    notes = [n for n in sorted(view.notes.values(), key=lambda n: n.path) if not _skip(n)]
    if len(notes) < 2:
        return {}
    index = {n.note_id: i for i, n in enumerate(notes)}
    links = [
        {index[t] for target in n.links if (t := view.resolve_link(n, target)) in index}
        for n in notes
    ]
    ranked = rank_related(
        note_vectors(embedder, notes),
        links,
        [current_topic(n, topics) for n in notes],
        k=spec.k,
        min_score=spec.min_score,
    )
    namer = LinkNamer(n.path for n in notes)
    style = _link_style(notes, spec.link_style)
    blocks = {}
    for note, picks in zip(notes, ranked, strict=True):
        lines = [
            namer.wikilink(notes[j].path, notes[j].title)
            if style == "wikilink"
            else namer.markdown_link(note.path, notes[j].path, notes[j].title)
            for j, _ in picks
        ]
        blocks[note.path] = (
            "\n".join([RELATED_HEADING, *(f"- {x}" for x in lines)]) if lines else ""
        )
    return blocks


def _skip(note: Note) -> bool:
    return note.refused is not None or unusable_note(note) is not None


def plan_reorganize(
    ctx: RunContext, workspace: Workspace, outcomes: Sequence[OperationOutcome]
) -> list[OperationOutcome]:
    """The run's ``reorganize:`` operations, planned after the turns' ones."""
    reorganize = ctx.loaded.spec.reorganize
    if reorganize is None or reorganize.related is None:
        return []
    view = planned_view(workspace, outcomes)
    embedder: Embedder | None = ctx.embedder
    if embedder is None:
        embedder = load_embedder((ctx.loaded.spec.judgement or Judgement()).embedder)
    blocks = related_blocks(view, embedder, ctx.taxonomy.topics, reorganize.related)
    turn = max((o.turn for o in outcomes), default=-1) + 1
    planned: list[OperationOutcome] = []
    for path, content in blocks.items():
        if path in ctx.left_alone:  # undone or "leave it": not rewritten until it changes
            continue
        note = view.note_at(path)
        assert note is not None
        op = Operation(
            operation_id=f"related-{len(planned) + 1}",
            kind="relate_note",
            target_note_id=note.note_id,
            target_path=path,
            title=note.title,
            body_markdown=content,
            reason=f"{max(content.count(chr(10)), 0)} related note(s) from embeddings, "
            "links and topics",
            confidence=1.0,
        )
        try:
            change = render_change(view, op)
        except ChangeRejected as exc:
            ctx.warnings.append(f"related notes not written to {path}: {exc.message}")
            continue
        if change is None or change.new == change.old:
            continue  # the block already says this: nothing to write
        planned.append(
            OperationOutcome(
                turn=turn,
                seq=len(planned),
                operation=op,
                status="planned",
                path=path,
                before_sha256=change.old_sha256,
                after_sha256=change.new_sha256,
            )
        )
    return planned
