"""Inputs the figures share: specs, replay scripts, workspaces, the runbooks corpus.

Everything is generated into a scratch folder per figure (the repo's
``data/notes`` and the shared corpus are only ever copied, never written).
Specs are written as YAML the normal loader reads, so a benchmark run goes
through exactly the code path a user's run does.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "NOTES_DIR",
    "NullStore",
    "TimedProvider",
    "PACK_SMALL",
    "REPO",
    "RUNBOOK_SUBSYSTEMS",
    "copy_notes",
    "keyword_guess",
    "load_runbook_labels",
    "make_notes",
    "request_order",
    "retag_response",
    "runbooks_dir",
    "write_replay_script",
    "write_spec",
]

REPO = Path(__file__).resolve().parents[1]
NOTES_DIR = REPO / "data" / "notes"
PACK_SMALL = REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"
SAMPLE_TOPICS = (
    "databases",
    "networking",
    "security",
    "observability",
    "cooking",
    "travel",
    "finance",
    "reading",
)
# Taxonomy order from the corpus README; the keyword baseline breaks ties by it.
RUNBOOK_SUBSYSTEMS = (
    "alertmanager",
    "etcd",
    "general",
    "kube-state-metrics",
    "kubernetes",
    "node",
    "prometheus",
    "prometheus-operator",
)


def shipped_min_confidence() -> float:
    """``constraints.min_confidence`` of ``specs/librarian.yaml``: the bench follows the spec."""
    doc = yaml.safe_load((REPO / "specs" / "librarian.yaml").read_text(encoding="utf-8"))
    return float(doc["constraints"]["min_confidence"])


def write_spec(
    path: Path,
    *,
    name: str,
    model: str | dict[str, Any],
    topics: Sequence[str] = SAMPLE_TOPICS,
    goal: str | None = None,
    allowed_kinds: Sequence[str] = ("retag_note", "retitle_note", "defer"),
    batch_size: int = 1,
    max_operations: int = 4,
    max_repair_retries: int = 2,
    min_confidence: float | None = None,
    context_window_tokens: int = 2048,
    max_tokens: int = 256,
    constrain: str = "grammar",
    pack: Path = PACK_SMALL,
) -> Path:
    """A librarian spec like ``specs/librarian.yaml`` with the given knobs; returns ``path``."""
    model_block: dict[str, Any] = {"name": model} if isinstance(model, str) else dict(model)
    model_block.setdefault("temperature", 0.0)
    model_block["max_tokens"] = max_tokens
    model_block["constrain"] = constrain
    doc: dict[str, Any] = {
        "name": name,
        "version": "1",
        "transport": "xml_attrless",
        "model": model_block,
        "prompt_pack": str(pack),
        "taxonomy": {"topics": list(topics)},
        "constraints": {
            "strict_mode": False,
            "max_operations": max_operations,
            "batch_size": batch_size,
            "max_repair_retries": max_repair_retries,
            "min_confidence": (
                shipped_min_confidence() if min_confidence is None else min_confidence
            ),
            "allowed_kinds": list(allowed_kinds),
            "context_window_tokens": context_window_tokens,
        },
    }
    if goal is not None:
        doc["goal"] = goal
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def write_replay_script(path: Path, texts: Iterable[str]) -> Path:
    """A ``replay:`` script: one completion per text, in order."""
    lines = [json.dumps({"text": t, "finish_reason": "stop"}) + "\n" for t in texts]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def retag_response(note_id: str, topic: str, *, request_id: str = "{{request_id}}") -> str:
    """A valid one-operation response, laid out as the grammar makes the model write it."""
    from toolwire.domain import LibrarianResponse, Operation
    from toolwire.protocols.attrless import render_response

    op = Operation("op_1", "retag_note", note_id, None, note_id, topic, "About " + topic, 0.9)
    return render_response(
        LibrarianResponse(request_id, "ok", f"Retag {note_id} as {topic}.", (op,), ())
    )


def make_notes(root: Path, count: int, *, words: int = 120) -> Path:
    """``count`` small notes with front matter (what replayed engine runs operate on)."""
    root.mkdir(parents=True, exist_ok=True)
    filler = " ".join(["index", "query", "latency", "cache", "replica"] * (words // 5))
    for i in range(count):
        (root / f"note-{i:04d}.md").write_text(
            f"---\ntitle: Note {i}\ntags: [inbox]\n---\n# Note {i}\n\n{filler}\n",
            encoding="utf-8",
        )
    return root


def copy_notes(src: Path, dst: Path, names: Sequence[str] | None = None) -> Path:
    """Copy a notes folder (or only ``names``, relative paths) into ``dst``."""
    if names is None:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".toolwire", ".git"))
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, target)
    return dst


def request_order(spec: Path, workspace: Path) -> list[tuple[str, ...]]:
    """Note ids of each request, in the order a run sends them (to script replies)."""
    from toolwire.librarian.job import build_requests, load_context, load_workspace

    ctx = load_context(spec, workspace=workspace)
    return [tr.note_ids for tr in build_requests(ctx, load_workspace(ctx))]


def runbooks_dir() -> Path:
    """The labelled runbooks corpus (``TOOLWIRE_BENCH_RUNBOOKS`` overrides the default)."""
    env = os.environ.get("TOOLWIRE_BENCH_RUNBOOKS")
    return Path(env) if env else REPO.parent / "shared" / "corpora" / "runbooks"


def load_runbook_labels(root: Path) -> dict[str, str]:
    """note_id -> subsystem, from ``labels.csv``."""
    with (root / "labels.csv").open(encoding="utf-8", newline="") as handle:
        return {row["note_id"]: row["subsystem"] for row in csv.DictReader(handle)}


def keyword_guess(text: str, topics: Sequence[str]) -> str:
    """The topic whose name occurs most often in ``text`` (case-insensitive substring
    count); ties, including no occurrence at all, go to the first in ``topics`` order."""
    lowered = text.lower()
    counts = [lowered.count(topic.lower()) for topic in topics]
    return topics[counts.index(max(counts))]


class NullStore:
    """Accepts every write the engine makes and keeps nothing.

    Swapped in for ``ctx.store`` to measure the engine without DuckDB, so the
    store's share of a turn can be reported on its own.
    """

    def __init__(self) -> None:
        self.attempts = 0

    def record_attempt(self, run_id: str, attempt: Any) -> None:
        self.attempts += 1

    def finish_run(self, run_id: str, **kwargs: Any) -> None:
        pass

    def record_spec(self, *args: Any) -> None:
        pass

    def record_pack(self, *args: Any) -> None:
        pass

    def start_run(self, run: dict[str, Any]) -> None:
        pass

    def begin_session(self) -> None:
        return None

    def end_session(self, token: Any) -> None:
        pass

    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[Any]]:
        """No rows: a fresh store (the user-profile lookup finds nothing)."""
        return [], []

    def record_warnings(self, run_id: str, warnings: list[str]) -> int:
        return len(warnings)

    def write(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        return []


class TimedProvider:
    """Wraps a provider and clocks every ``complete`` call, whoever makes it.

    Attempts record their own latency, but the engine also calls the model
    outside attempts (seed 004's profile synthesis after a run): this sees both.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls = 0
        self.seconds = 0.0

    def complete(self, request: Any) -> Any:
        start = time.perf_counter()
        try:
            return self._inner.complete(request)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
