"""`toolwire review`: answer the librarian's questions (deferred and misfiled notes).

On a terminal it walks the open questions of the latest librarian run one by one
(a Rich prompt); ``--list`` and ``--answer PATH=TOPIC`` / ``--answers FILE.json`` are
the same loop for scripts and tests. Each answer is stored first, then a topic is
written through the journal as a run of its own (``toolwire undo RUN_ID`` reverts it).
The store and the librarian are imported inside the command: ``--help`` stays fast.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from toolwire.cli import _output
from toolwire.cli._options import DbOption, check_user
from toolwire.cli._output import shown
from toolwire.errors import ToolwireError, UsageError

if TYPE_CHECKING:
    from toolwire.librarian.notes.workspace import Workspace
    from toolwire.librarian.review import ReviewRound
    from toolwire.librarian.review_answers import Answer
    from toolwire.store import Store
    from toolwire.store.review import QuestionRow

__all__ = ["register"]

LINES_SHOWN = 5
LINE_CHARS = 100


class ListFormat(StrEnum):
    table = "table"
    json = "json"


def _fail(exc: ToolwireError) -> typer.Exit:
    _output.error_line(exc)
    return typer.Exit(2 if isinstance(exc, UsageError) else 1)


def review_command(
    workspace: Annotated[
        Path | None,
        typer.Option(help="Notes folder [default: that of the latest librarian run in the store]"),
    ] = None,
    db: DbOption = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run", help="Answer this librarian run's questions [default: the latest]"),
    ] = None,
    list_only: Annotated[
        bool, typer.Option("--list", help="Print the questions and their state; change nothing")
    ] = False,
    fmt: Annotated[
        ListFormat, typer.Option("--format", "-f", help="With --list: table or json")
    ] = ListFormat.table,
    answer: Annotated[
        list[str] | None,
        typer.Option(
            "--answer",
            "-a",
            metavar="PATH=TOPIC",
            help="PATH=TOPIC, or PATH=- to leave the note as it is (repeatable); no prompt",
        ),
    ] = None,
    answers_file: Annotated[
        Path | None,
        typer.Option(
            "--answers", help='JSON object {"PATH": "TOPIC" or null to leave it}; no prompt'
        ),
    ] = None,
    user: Annotated[str | None, typer.Option(help="Who answers [env TOOLWIRE_USER]")] = None,
) -> None:
    """Answer the librarian's questions: notes it deferred, notes it thinks misfiled.

    Each answer is kept in the store; a topic is written to the note through the
    journal as a run of its own (`toolwire undo RUN_ID` reverts it), and every later
    run counts the note as tagged. 'd' (none of these: the note is left as it is)
    keeps it out of later questions until its text changes.
    """
    from toolwire.spec.settings import load_settings

    try:
        settings = load_settings()
        who = check_user(user) or settings.user  # before the store: nothing half-done
        store = _open_store(db, settings)
        review = _load_round(store, workspace, run_id)
        if list_only:
            if answer or answers_file:
                raise UsageError("--list changes nothing; give it without --answer/--answers")
            _print_list(review, fmt)
            return
        if answer or answers_file:
            pairs = _given_answers(answer or [], answers_file)
            _apply_given(store, review, pairs, who)
            return
        if not sys.stdin.isatty():
            raise UsageError(
                "no terminal to ask on: use --list, --answer PATH=TOPIC or --answers FILE.json"
            )
        _walk(store, review, who)
    except ToolwireError as exc:
        raise _fail(exc) from exc


def _open_store(db: Path | None, settings: Any) -> Store:
    from toolwire.store import Store

    # Never created here: questions exist only in a store a librarian run wrote.
    return Store(db or settings.db, lock_timeout_s=settings.db_lock_timeout_s, create=False)


def _load_round(store: Store, workspace: Path | None, run_id: str | None) -> ReviewRound:
    from toolwire.librarian.review import load_round

    if workspace is not None and not workspace.is_dir():
        raise UsageError(f"workspace {workspace} is not a directory")
    return load_round(store, workspace, run_id)


# -- --list ----------------------------------------------------------------------------


def _print_list(review: ReviewRound, fmt: ListFormat) -> None:
    if fmt is ListFormat.json:
        document = {
            "run_id": review.run["run_id"],
            "workspace": str(review.root),
            "topics": review.topics,
            "questions": [
                {
                    "path": q.question.note_path,
                    "note_id": q.question.note_id,
                    "kind": q.question.kind,
                    "state": q.state,
                    "current_topic": q.question.current_topic,
                    "candidates": list(q.question.candidates),
                    "why": q.question.why,
                }
                for q in review.questions
            ],
        }
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        return
    out = _output.stdout
    run = review.run
    out.print(
        Text(
            f"questions of run {run['run_id'][:12]} on {review.root}: "
            f"{len(review.open)} open of {len(review.questions)}"
        )
    )
    for q in review.questions:
        best = ", ".join(
            f"{c['topic']} {float(c['confidence']):.2f}" for c in q.question.candidates[:3]
        )
        current = q.question.current_topic or "-"
        out.print(
            Text(
                shown(
                    f"  {q.state:<8} {q.question.kind:<8} {q.question.note_path}  "
                    f"[{current}] {best}"
                )
            )
        )


# -- --answer / --answers ---------------------------------------------------------------


MAX_ANSWERS_BYTES = 16 * 1024 * 1024


def _given_answers(given: list[str], answers_file: Path | None) -> list[tuple[str, str | None]]:
    """(path, topic or None for not a topic) from ``--answer`` and ``--answers``."""
    pairs: list[tuple[str, str | None]] = []
    for item in given:
        path, sep, topic = item.rpartition("=")
        if not sep or not path.strip() or not topic.strip():
            raise UsageError(f"--answer {item!r}: expected PATH=TOPIC (or PATH=- for not a topic)")
        pairs.append((path.strip(), None if topic.strip() == "-" else topic.strip()))
    if answers_file is not None:
        try:
            with answers_file.open("rb") as handle:  # bounded: /dev/zero ran out of memory
                raw = handle.read(MAX_ANSWERS_BYTES + 1)
            if len(raw) > MAX_ANSWERS_BYTES:
                raise UsageError(f"--answers {answers_file}: larger than 16 MiB")
            data = json.loads(raw.decode("utf-8"))
        except OSError as exc:
            raise UsageError(f"--answers {answers_file}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"--answers {answers_file}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in data.items()
        ):
            raise UsageError(f'--answers {answers_file}: expected {{"PATH": "TOPIC" or null, ...}}')
        pairs += list(data.items())
    return pairs


def _apply_given(
    store: Store, review: ReviewRound, pairs: list[tuple[str, str | None]], who: str
) -> None:
    """Check every answer first (unknown note or topic, a changed note: nothing is
    applied), then apply them in order."""
    from toolwire.librarian.review_answers import Answer, apply_answer

    planned: list[tuple[QuestionRow, Answer]] = []
    for path, topic in pairs:
        found = review.find(path)
        q = found.question
        if found.state != "open":
            raise UsageError(_not_open(q, found.state))
        planned.append(
            (q, Answer("not_a_topic") if topic is None else _topic_answer(topic, q, review))
        )
    seen = [q.note_path for q, _ in planned]
    twice = sorted({p for p in seen if seen.count(p) > 1})
    if twice:
        raise UsageError(f"two answers for {', '.join(twice)}; give one per note")
    ws = review.load_workspace()
    for q, ans in planned:
        done = apply_answer(store, review, q, ans, user_id=who, source="cli", workspace=ws)
        ws = _reloaded(ws, review.root, q.note_path)
        _output.stdout.print(Text(shown(done.line())))


def _topic_answer(topic: str, q: QuestionRow, review: ReviewRound) -> Answer:
    from toolwire.librarian.review_answers import Answer

    by_fold = {t.casefold(): t for t in review.topics}
    if topic.casefold() not in by_fold:
        raise UsageError(f"unknown topic {topic!r}; topics: {', '.join(review.topics)}")
    return Answer("topic", by_fold[topic.casefold()])


def _not_open(q: QuestionRow, state: str) -> str:
    if state == "changed":
        return (
            f"{q.note_path} changed since run {q.run_id[:12]} asked about it; "
            "run the librarian again for a fresh question"
        )
    if state == "missing":
        return f"{q.note_path} is gone since run {q.run_id[:12]} asked about it"
    return f"{q.note_path} is already answered"


def _reloaded(ws: Workspace, root: Path, path: str) -> Workspace:
    """The session's workspace with one note's bytes as they are now on disk."""
    from toolwire.librarian.review import current_bytes

    raw = current_bytes(root, path)
    return ws.with_file(path, raw) if raw is not None else ws


# -- the prompt -------------------------------------------------------------------------


def _walk(store: Store, review: ReviewRound, who: str) -> None:
    from rich.prompt import Prompt

    from toolwire.librarian.review_answers import apply_answer, parse_answer

    out = _output.stdout
    questions = review.open
    if not questions:
        out.print(Text(f"no open questions in run {review.run['run_id'][:12]} on {review.root}"))
        return
    out.print(
        Text(
            f"{len(questions)} open question(s) of run {review.run['run_id'][:12]} on {review.root}"
        )
    )
    ws = review.load_workspace()
    answered = 0
    for n, q in enumerate(questions, start=1):
        _show(out, ws, q, n, len(questions))
        while True:
            # Text, not a str: Rich would read "[...]" as markup and print nothing of it.
            typed = Prompt.ask(
                Text(f"answer [1-{len(q.candidates)} or a topic, s skip, d none/leave, q quit]"),
                console=out,
            )
            try:
                ans = parse_answer(typed, q, review.topics)
            except UsageError as exc:
                _output.error_line(exc)
                continue
            break
        if ans.kind == "quit":
            break
        if ans.kind == "skip":
            continue
        try:
            done = apply_answer(store, review, q, ans, user_id=who, source="prompt", workspace=ws)
        except ToolwireError as exc:  # e.g. the note changed meanwhile: the next question
            _output.error_line(exc)
            continue
        ws = _reloaded(ws, review.root, q.note_path)
        answered += 1
        out.print(Text(shown(done.line()), style="green"))
    out.print(Text(f"{answered} answer(s) applied; `toolwire review --list` shows what is left"))


def _show(out: Any, ws: Workspace, q: QuestionRow, n: int, total: int) -> None:
    """One question: the note's title and first lines, control characters escaped (a
    note's escape sequences reached the terminal raw, issue 45 item 14)."""
    note = ws.note_at(q.note_path)
    title = (note.title if note is not None else "") or "(untitled)"
    out.rule(Text(shown(f"{n}/{total}  {q.note_path}")))
    out.print(Text(shown(f"title: {title}"), style="bold"))
    lines = [line for line in (note.body if note else "").splitlines() if line.strip()]
    for line in lines[:LINES_SHOWN]:
        cut = line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
        out.print(Text(shown(f"  │ {cut}"), style="dim"))
    kind = (
        "no topic was confident enough"
        if q.kind == "deferred"
        else f"its topic {q.current_topic} is rated far below another"
    )
    out.print(Text(f"asked because {kind}; now: {q.current_topic or 'no topic'}"))
    if q.why.startswith("an answer"):  # what the answer is expected to decide (issue 41)
        out.print(Text(q.why.split("; ", 1)[0]))
    for i, c in enumerate(q.candidates, start=1):
        out.print(Text(shown(f"  {i}) {c['evidence']}")))


def register(app: typer.Typer) -> None:
    """Add ``review`` to the root app."""
    app.command("review")(review_command)
