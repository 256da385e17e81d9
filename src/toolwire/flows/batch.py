"""Batch runs: workspaces x models x transports as one Prefect flow, one store at the end.

Runs are Prefect tasks (runs that write one workspace share a task and run
one after another); the task runner's worker count is the batch's
concurrency limit. Where rows go depends on the runner, because DuckDB allows
one writing process per file:

* ``threads`` (default): every run writes the target store directly; threads in
  one process share DuckDB's instance and the Store's per-file write lock.
* ``processes`` / ``dask``: each worker process writes its own shard,
  ``<db>.shards/<host>-<pid>.duckdb``; the flow merges the shards into the
  target when every run is done (``store.shards.merge_stores``) and deletes
  them only after a successful merge. With Dask on several machines the
  shards folder must be on storage they share, or be merged later with
  ``toolwire store merge``.

At the end the flow counts what landed (a planned run with no finished row
is *lost*), runs the data-quality checks and records both in the store.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.settings import PREFECT_API_URL
from prefect.states import Completed, Failed, State

from toolwire.errors import ToolwireError, UsageError
from toolwire.flows.model_call import with_prefect_retries
from toolwire.jobs import JobContext, RunOptions, job_for, resolve_options
from toolwire.lifecycle import run_job
from toolwire.run.base import resolve_loaded
from toolwire.spec.model import load_spec
from toolwire.spec.settings import load_settings
from toolwire.store import Store
from toolwire.store.quality import QualityReport, check_store, record_quality
from toolwire.store.shards import merge_shard_dir, store_write

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

__all__ = [
    "TASK_RUNNERS",
    "BatchItem",
    "BatchResult",
    "BatchShared",
    "Outcome",
    "batch_flow",
    "chain_items",
    "execute_item",
    "make_task_runner",
    "plan_batch",
    "prepare_batch",
    "run_batch",
    "run_batch_chain",
    "worker_id",
]

TASK_RUNNERS: tuple[str, ...] = ("threads", "processes", "dask")
# What one run of a batch came to: its item's fields, worker, db, run_id, status, error.
Outcome = dict[str, str | int | None]
FINISHED = ("ok", "unchecked", "Failed")

# The CLI's progress bar: set by the in-process caller (a callable is no flow parameter).
progress_hook: Callable[[int, int, Outcome], None] | None = None


def _report_progress(done: int, total: int, outcome: Outcome) -> None:
    """Call the progress hook. A module function on purpose: ``batch_flow`` is pickled by
    value for process workers (its ``fn`` is not importable under its own name), and a
    global it named directly would be pickled with it: the CLI's hook holds a terminal
    console whose lock cannot be pickled (`cannot pickle '_thread.RLock'`)."""
    if progress_hook is not None:
        progress_hook(done, total, outcome)


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One run of the cross product; ``None`` model/transport means the spec's own."""

    index: int
    workspace: str
    model: str | None = None
    transport: str | None = None


@dataclass(frozen=True, slots=True)
class BatchShared:
    """What every run of one batch shares; ``shard_dir`` None = write ``db`` directly."""

    spec_path: str
    db: str
    batch_id: str
    shard_dir: str | None = None
    dry_run: bool = False
    flow_run_id: str | None = None


@dataclass
class BatchResult:
    """What a batch planned, what landed in the store, and the quality verdict."""

    batch_id: str
    db: Path
    planned: int
    outcomes: list[Outcome]
    finished: int
    failed: int
    lost: int
    quality: QualityReport | None = None  # None when the checks were skipped
    merged_shards: list[Path] = field(default_factory=list)
    unchecked: int = 0  # finished runs nothing proved done (no check in the spec)

    @property
    def ok(self) -> bool:
        """No run Failed, nothing lost, and the store passed its checks (an ``unchecked``
        run did not fail; ``counts`` says how many there were)."""
        return self.failed == 0 and self.lost == 0 and (self.quality is None or self.quality.ok)

    def counts(self) -> str:
        """One line of counts: the batch's Prefect state message and the CLI's summary."""
        verdict = "skipped" if self.quality is None else ("ok" if self.quality.ok else "FAILED")
        return (
            f"planned {self.planned}, finished {self.finished} ({self.failed} Failed, "
            f"{self.unchecked} unchecked), "
            f"lost {self.lost}; checks {verdict}"
        )


def _absolute_model(model: str | None) -> str | None:
    # A replay script path given on the command line is relative to the cwd; workers
    # (other processes, other machines' same checkout) must not depend on theirs.
    if model and model.startswith("replay:"):
        return "replay:" + str(Path(model.partition(":")[2]).expanduser().resolve())
    return model


def _model_for(model: str | None, transport: str | None) -> str | None:
    # Replay scripts are written in one wire format, so a batch over transports names
    # one script per transport: "replay:cassettes/agent-{transport}.jsonl".
    if model and "{transport}" in model:
        if transport is None:
            raise UsageError(f"model {model!r} names {{transport}}: pass --transports")
        model = model.replace("{transport}", transport)
    return _absolute_model(model)


def plan_batch(
    workspaces: Sequence[str | Path],
    models: Sequence[str] | None = None,
    transports: Sequence[str] | None = None,
) -> list[BatchItem]:
    """The cross product, workspace-major, with absolute paths; duplicates dropped.

    A model name may contain ``{transport}``, replaced per run (replay scripts
    are written in one transport's wire format).
    """
    if not workspaces:
        raise UsageError("a batch needs at least one --workspace")
    spaces = list(dict.fromkeys(str(Path(w).expanduser().resolve()) for w in workspaces))
    model_opts: list[str | None] = [*models] if models else [None]
    transport_opts: list[str | None] = [*transports] if transports else [None]
    combos = product(spaces, dict.fromkeys(model_opts), dict.fromkeys(transport_opts))
    return [BatchItem(i, w, _model_for(m, t), t) for i, (w, m, t) in enumerate(combos)]


def _options(item: BatchItem, shared: BatchShared, db: str) -> RunOptions:
    return RunOptions(
        spec_path=shared.spec_path,
        workspace=item.workspace,
        db=db,
        model=item.model,
        transport=item.transport,
        dry_run=shared.dry_run,
        flow_run_id=shared.flow_run_id,
    )


def _preflight(spec_path: Path, items: list[BatchItem]) -> None:
    """Fail before any run starts on what would fail every run: spec, pack, models, folders."""
    for item in items:
        if not Path(item.workspace).is_dir():
            raise UsageError(f"workspace {item.workspace} is not a directory")
    settings = load_settings()
    for model, transport in dict.fromkeys((i.model, i.transport) for i in items):
        options = RunOptions(str(spec_path), items[0].workspace, model=model, transport=transport)
        options, resolved = resolve_options(options, settings)
        job_for(resolved).load(options, settings)


def prepare_batch(
    spec_path: str | Path,
    workspaces: Sequence[str | Path],
    models: Sequence[str] | None = None,
    transports: Sequence[str] | None = None,
) -> list[BatchItem]:
    """Plan the cross product and check it can start (UsageError/SpecError if not)."""
    items = plan_batch(workspaces, models, transports)
    _preflight(Path(spec_path).resolve(), items)
    return items


def chain_items(
    spec_path: str | Path, items: list[BatchItem], dry_run: bool
) -> list[list[BatchItem]]:
    """Group runs that write the same workspace, in cross-product order.

    A librarian run writes its workspace unless ``dry_run``; a tool agent always
    may (its tools write files). Runs in one group run one after another, so two
    runs never change one folder at once; read-only runs each get their own group.
    """
    groups: dict[str, list[BatchItem]] = {}
    loaded = load_spec(spec_path)
    for item in items:
        options = RunOptions(str(spec_path), item.workspace, dry_run=dry_run)
        job = job_for(resolve_loaded(loaded, load_settings(), None, item.transport))
        writes = job.writes_workspace(options)
        key = item.workspace if writes else f"{item.workspace}#{item.index}"
        groups.setdefault(key, []).append(item)
    return list(groups.values())


def worker_id() -> str:
    """``<host>-<pid>``: names this process's shard, unique across machines."""
    raw = f"{socket.gethostname()}-{os.getpid()}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


def _tag_batch(store: Store, run_id: str, batch_id: str) -> None:
    with store_write(store, f"tag run {run_id} with batch {batch_id}") as con:
        con.execute("UPDATE runs SET batch_id = ? WHERE run_id = ?", [batch_id, run_id])


def execute_item(item: BatchItem, shared: BatchShared) -> Outcome:
    """One run of a batch through the run lifecycle (``toolwire.lifecycle``), like any run.
    Its own errors go in the returned outcome: one bad run must not stop the rest."""
    db = shared.db
    if shared.shard_dir is not None:
        db = str(Path(shared.shard_dir) / f"{worker_id()}.duckdb")
    outcome: Outcome = asdict(item) | {"worker": worker_id(), "db": db, "run_id": None}
    outcome |= {"status": "not_started", "error_code": None, "error_message": None}

    def started(ctx: JobContext) -> None:
        outcome["run_id"] = ctx.run_id
        assert ctx.store is not None
        _tag_batch(ctx.store, ctx.run_id, shared.batch_id)

    try:
        result = run_job(_options(item, shared, db), on_start=started, wrap=with_prefect_retries)
        outcome.update(
            status=result.status, error_code=result.error_code, error_message=result.error_message
        )
    except ToolwireError as exc:  # before the run row, or after the job marked it Failed
        status = "Failed" if outcome["run_id"] else "not_started"
        outcome.update(status=status, error_code=exc.code, error_message=exc.message)
    return outcome


@task(name="batch-runs", cache_policy=NO_CACHE, persist_result=False)
def run_batch_chain(items: list[BatchItem], shared: BatchShared) -> list[Outcome] | State:
    """Runs that share a workspace, one after another, as one Prefect task: ``Failed``
    (its outcomes still in the state) when any of them did not end ok."""
    outcomes = [execute_item(item, shared) for item in items]
    bad = [o for o in outcomes if o["status"] not in ("ok", "unchecked")]
    if not bad:
        return outcomes
    codes = ", ".join(sorted({str(o["error_code"]) for o in bad}))
    message = f"{len(bad)} of {len(outcomes)} runs failed ({codes})"
    return Failed(message=message, data=outcomes)


def _chain_outcomes(state: State, chain: list[BatchItem]) -> list[Outcome]:
    """A finished ``batch-runs`` task's outcomes; a crash (no outcomes) counts each run."""
    value = state.result(raise_on_failure=False)
    if isinstance(value, list):
        return value
    crash = {"status": "crashed", "run_id": None, "worker": None, "db": None}
    code = type(value).__name__ if isinstance(value, BaseException) else state.type.value
    crash |= {"error_code": code, "error_message": str(value or state.message)}
    return [asdict(item) | crash for item in chain]


# The in-process caller's results, by flow run id: the flow's state carries only its
# counts (a served or deployed run's engine turns a Failed state's data into an error).
_results: dict[str, BatchResult] = {}


def _record_batch(store: Store, row: dict[str, object], *, update: bool) -> None:
    with store_write(store, f"record batch {row['batch_id']}") as con:
        if update:
            sets = ", ".join(f"{k} = ?" for k in row if k != "batch_id")
            values = [v for k, v in row.items() if k != "batch_id"]
            con.execute(f"UPDATE batches SET {sets} WHERE batch_id = ?", [*values, row["batch_id"]])
        else:
            cols = ", ".join(row)
            marks = ", ".join("?" * len(row))
            con.execute(f"INSERT INTO batches ({cols}) VALUES ({marks})", list(row.values()))


@contextmanager
def _api_url_for_subprocesses() -> Iterator[None]:
    """Point worker processes at this flow's API server while tasks are submitted.

    Without PREFECT_API_URL the flow runs on a temporary server, and each process
    worker would start (and, when killed, orphan) a temporary server of its own;
    under load they time out connecting to it. Prefect copies ``os.environ`` into
    the workers at the first submit, so setting it around the submits is enough.
    """
    if PREFECT_API_URL.value():
        yield
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        url = str(client.api_url).rstrip("/")
    os.environ["PREFECT_API_URL"] = url
    try:
        yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@flow(name="toolwire-batch", log_prints=False, persist_result=False)
def batch_flow(
    spec_path: str,
    items: list[BatchItem],
    db: str,
    batch_id: str,
    task_runner: str = "threads",
    max_workers: int = 2,
    dry_run: bool = False,
    check: bool = False,
) -> State:
    """Submit every item, wait, merge shards, count what landed, check and record.

    Ends ``Failed`` when a run did not end ok, a run is lost or the checks fail, with
    the counts as the message; the BatchResult goes to ``run_batch`` in process."""
    from prefect.futures import as_completed
    from prefect.runtime import flow_run

    db_path = Path(db)
    store = Store(db_path)
    shared = BatchShared(
        spec_path=spec_path,
        db=str(db_path),
        batch_id=batch_id,
        shard_dir=None if task_runner == "threads" else str(db_path) + ".shards",
        dry_run=dry_run,
        flow_run_id=str(flow_run.id) if flow_run.id else None,
    )
    row: dict[str, object] = {
        "batch_id": batch_id,
        "spec_hash": load_spec(spec_path).hash,
        "spec_path": spec_path,
        "flow_run_id": shared.flow_run_id,
        "task_runner": task_runner,
        "max_workers": max_workers,
        "planned": len(items),
        "finished": 0,
        "failed": 0,
        "lost": len(items),
        "started_at": _now(),
    }
    _record_batch(store, row, update=False)
    with _api_url_for_subprocesses() if shared.shard_dir else nullcontext():
        futures = {
            run_batch_chain.submit(chain, shared): chain
            for chain in chain_items(spec_path, items, dry_run)
        }
    outcomes: list[Outcome] = []
    for future in as_completed(list(futures)):
        future.wait()
        for outcome in _chain_outcomes(future.state, futures[future]):
            outcomes.append(outcome)
            _report_progress(len(outcomes), len(items), outcome)
    merged = merge_shard_dir(db_path, shared.shard_dir) if shared.shard_dir else []
    _, counts = store.query(
        "SELECT status, count(*) FROM runs WHERE batch_id = ? GROUP BY status", [batch_id]
    )
    by_status = {str(status): int(n) for status, n in counts}
    quality = check_store(store) if check else None
    if quality is not None:
        record_quality(store, quality, batch_id=batch_id)
    finished = sum(by_status.get(s, 0) for s in FINISHED)
    failed, lost = by_status.get("Failed", 0), len(items) - finished
    row |= {"finished": finished, "failed": failed, "lost": lost, "ended_at": _now()}
    row |= {"quality_ok": quality and quality.ok, "check_id": quality and quality.check_id}
    _record_batch(store, row, update=True)
    result = BatchResult(
        batch_id=batch_id,
        db=db_path,
        planned=len(items),
        outcomes=sorted(outcomes, key=lambda o: int(o["index"] or 0)),
        finished=finished,
        failed=failed,
        unchecked=by_status.get("unchecked", 0),
        lost=lost,
        quality=quality,
        merged_shards=merged,
    )
    if shared.flow_run_id:
        _results[shared.flow_run_id] = result
    if result.ok:
        return Completed(message=result.counts())
    return Failed(message=result.counts())


def make_task_runner(
    kind: str, max_workers: int, dask_address: str | None = None
) -> TaskRunner[Any]:
    """The Prefect task runner for ``kind``; its worker count is the concurrency limit."""
    if max_workers < 1:
        raise UsageError("--max-workers must be at least 1")
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=max_workers)
    if kind == "processes":
        from prefect.task_runners import ProcessPoolTaskRunner

        return ProcessPoolTaskRunner(max_workers=max_workers)
    if kind == "dask":
        if not PREFECT_API_URL.value():
            raise UsageError(
                "the dask task runner needs a Prefect server its workers can reach: start "
                "`prefect server start` and set PREFECT_API_URL"
            )
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise UsageError(
                "the dask task runner needs prefect-dask: pip install prefect-dask"
            ) from None
        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": max_workers, "threads_per_worker": 1})
    raise UsageError(f"unknown task runner {kind!r}; expected one of {', '.join(TASK_RUNNERS)}")


def run_batch(
    spec_path: str | Path,
    workspaces: Sequence[str | Path],
    *,
    models: Sequence[str] | None = None,
    transports: Sequence[str] | None = None,
    db: str | Path | None = None,
    task_runner: str = "threads",
    max_workers: int = 2,
    dask_address: str | None = None,
    dry_run: bool = False,
    check: bool = False,
    batch_id: str | None = None,
    on_progress: Callable[[int, int, Outcome], None] | None = None,
) -> BatchResult:
    """Plan, check up front, then run the batch flow with the chosen task runner."""
    global progress_hook
    spec = Path(spec_path).resolve()
    items = prepare_batch(spec, workspaces, models, transports)
    runner = make_task_runner(task_runner, max_workers, dask_address)
    db_path = Path(db) if db is not None else load_settings().db
    progress_hook = on_progress
    try:
        state = batch_flow.with_options(task_runner=runner)(
            str(spec),
            items,
            str(db_path.expanduser().resolve()),
            batch_id or uuid.uuid4().hex,
            task_runner=task_runner,
            max_workers=max_workers,
            dry_run=dry_run,
            check=check,
            return_state=True,
        )
    finally:
        progress_hook = None
    result = _results.pop(str(state.state_details.flow_run_id), None)
    if result is None:  # the flow stopped before its counts: raise what stopped it
        state.result()
        raise RuntimeError(f"the batch flow ended {state.type.value} without its counts")
    return result
