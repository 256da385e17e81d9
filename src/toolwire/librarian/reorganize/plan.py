"""The reorganize step of a librarian run: after the model's (or scorer's) turns and
before apply, toolwire plans its own operations from the notes as the run will leave
them (``planned_view``), so they are validated, applied, journaled and stored like the
others.

Incremental by construction: every input is cheap to recompute (cached embeddings,
links, topics), and an operation is planned only where a note's block would change.
An unchanged vault plans nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
from toolwire.librarian.reorganize.index import index_blocks, is_index
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


def _index_link(namer: LinkNamer, style: str) -> Callable[[str, Note], str]:
    def link(from_path: str, note: Note) -> str:
        if style == "wikilink":
            return namer.wikilink(note.path, note.title)
        return namer.markdown_link(from_path, note.path, note.title)

    return link


def _wanted_blocks(ctx: RunContext, view: Workspace) -> list[tuple[str, str, str]]:
    """(kind, path, block content) for every block the spec asks for."""
    reorganize = ctx.loaded.spec.reorganize
    assert reorganize is not None
    topics = ctx.taxonomy.topics
    folder = reorganize.index.folder if reorganize.index is not None else None
    wanted: list[tuple[str, str, str]] = []
    if reorganize.related is not None:
        embedder: Embedder | None = ctx.embedder
        if embedder is None:
            embedder = load_embedder((ctx.loaded.spec.judgement or Judgement()).embedder)
        notes = view if folder is None else _without_indexes(view, folder)
        blocks = related_blocks(notes, embedder, topics, reorganize.related)
        wanted += [("relate_note", path, content) for path, content in blocks.items()]
    if reorganize.index is not None and folder is not None:
        usable = [n for n in view.notes.values() if not _skip(n)]
        namer = LinkNamer(n.path for n in view.notes.values())
        style = _link_style(usable, "auto")
        blocks = index_blocks(
            view, topics, folder, lambda n: current_topic(n, topics), _index_link(namer, style)
        )
        wanted += [("index_topic", path, content) for path, content in blocks.items()]
    return wanted


def _without_indexes(view: Workspace, folder: str) -> Workspace:
    """The vault without its index notes (they are lists, not notes to relate)."""
    notes = {i: n for i, n in view.notes.items() if not is_index(n.path, folder)}
    return Workspace(view.root, notes, view.warnings, view.files)


def plan_reorganize(
    ctx: RunContext, workspace: Workspace, outcomes: Sequence[OperationOutcome]
) -> list[OperationOutcome]:
    """The run's ``reorganize:`` operations, planned after the turns' ones."""
    if ctx.loaded.spec.reorganize is None:
        return []
    view = planned_view(workspace, outcomes)
    turn = max((o.turn for o in outcomes), default=-1) + 1
    planned: list[OperationOutcome] = []
    wanted = _wanted_blocks(ctx, view)
    if ctx.embedder is not None:  # run_costs counts what related notes embedded too
        ctx.costs.texts_embedded = ctx.embedder.misses
        ctx.costs.embedding_hits = ctx.embedder.hits
    for kind, path, content in wanted:
        if path in ctx.left_alone:  # undone or "leave it": not rewritten until it changes
            continue
        note = view.note_at(path)
        op = Operation(
            operation_id=f"{kind}-{len(planned) + 1}",
            kind=kind,
            target_note_id=note.note_id if note is not None else None,
            target_path=path,
            title=(note.title if note is not None else "") or path.rsplit("/", 1)[-1][:-3],
            body_markdown=content,
            reason=f"{content.count(chr(10)) + bool(content)} line(s) in toolwire's block",
            confidence=1.0,
        )
        try:
            change = render_change(view, op)
        except ChangeRejected as exc:
            ctx.warnings.append(f"{kind} not written to {path}: {exc.message}")
            continue
        if change is None or change.new == change.old:
            continue  # the block already says this: nothing to write
        view = view.with_file(change.path, change.new)
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
