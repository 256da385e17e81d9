"""What every job does before its first model call: find the workspace, open the run's
provider and store, record the run; and the run's hold on the store file until it ends.

Shared by the librarian (`toolwire.librarian.context`) and tool agents
(`toolwire.agent.context`), so both write the same content-addressed spec and
pack rows and the same 'running' run row, and both open the store file once per
run (a model call that takes time lets go of it meanwhile).

A process killed mid-run (SIGKILL, OOM, power) never finishes its run row: it
would say 'running' forever. Each run row therefore records the process id and
host that run it, and every new run on the same workspace settles the runs
whose process is gone: 'Failed' with ``RUN_INTERRUPTED``. Their attempts stay
as they were; their notes are settled by the journal (``journal.recover``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import RunNotFound, StoreError, ToolwireError, UsageError, WorkspaceError
from toolwire.providers import make_provider
from toolwire.providers.recording import RecordingProvider
from toolwire.run.base import RunBase
from toolwire.run.interrupts import INTERRUPTED
from toolwire.spec.model import Spec, canonical_json
from toolwire.spec.paths import workspace_refusal
from toolwire.spec.settings import Settings
from toolwire.store import Store

__all__ = [
    "RUN_INTERRUPTED",
    "open_run",
    "record_run_start",
    "release_store",
    "resolve_workspace",
    "store_free_while_waiting",
    "settle_dead_runs",
    "settle_interrupted",
]

RUN_INTERRUPTED = "RUN_INTERRUPTED"


def open_run(
    ctx: RunBase,
    *,
    settings: Settings,
    db: str | Path | None,
    record: str | Path | None,
    user: str | None,
    flow_run_id: str | None,
) -> None:
    """Open the run's provider (recording to ``record`` when asked) and store, and hold
    the store file from here to the run's end (``release_store``): the run's writes then
    share one open of the file, each still committed at once."""
    provider = make_provider(ctx.model_cfg, base_dir=ctx.loaded.base_dir)
    if record:
        provider = RecordingProvider(provider, Path(record))
    db_path = Path(db) if db else Path(settings.db)
    ctx.provider = provider
    ctx.store = Store(db_path, lock_timeout_s=settings.db_lock_timeout_s)
    ctx.user_id = user or settings.user
    ctx.flow_run_id = flow_run_id
    ctx.report_dir = db_path.parent / "reports"
    ctx.store_session = ctx.store.begin_session()


def release_store(ctx: RunBase) -> None:
    """End the run's hold on the store file (idempotent); other processes may take it."""
    token, ctx.store_session = ctx.store_session, None
    if token is not None and ctx.store is not None:
        ctx.store.end_session(token)


def store_free_while_waiting(
    ctx: RunBase, call: Callable[[CompletionRequest], Completion]
) -> Callable[[CompletionRequest], Completion]:
    """``call`` with the store file let go while the model thinks.

    A model call takes seconds to minutes; holding the file through it would make
    ``toolwire sql`` (or another run) wait for the whole run. A replay answers at
    once, so replayed runs keep their hold. If the hold cannot be taken back (another
    process has the file), each write waits for the file on its own, as outside a run.
    """
    if ctx.model_cfg.provider == "replay":
        return call

    def calling(request: CompletionRequest) -> Completion:
        release_store(ctx)
        try:
            return call(request)
        finally:
            try:
                ctx.store_session = ctx.store.begin_session() if ctx.store else None
            except ToolwireError:  # StoreLocked / StoreError: the next write retries
                ctx.store_session = None

    return calling


def resolve_workspace(
    workspace: str | Path | None, spec: Spec, base_dir: Path, *, what: str
) -> Path:
    """``--workspace``, else the spec's ``schedule.workspace`` (relative to the spec file)."""
    if workspace is not None:
        return Path(workspace).resolve()
    if spec.schedule is not None and spec.schedule.workspace:
        # The spec's own choice: only inside its folder (issue 30 item 7, spec_paths).
        target = (base_dir / spec.schedule.workspace).resolve()
        refusal = workspace_refusal(
            base_dir, spec.schedule.workspace,
            hint=f"pass --workspace {target} to run there, or keep the spec beside its notes",
        )  # fmt: skip
        if refusal is not None:
            raise UsageError(refusal)
        return target
    raise UsageError(f"no workspace: pass --workspace DIR ({what})")


def record_run_start(ctx: RunBase, *, job: str, dry_run: bool, settings: dict[str, object]) -> None:
    """Spec and pack (stored once per hash), then the run row with status 'running'.

    ``ctx`` has run_id, loaded, pack, model_cfg, transport, workspace_root,
    user_id, flow_run_id and store; ``settings`` lands in ``runs.settings_json``.
    If the row cannot be written, the run's hold on the store ends here (no run follows).
    """
    try:
        _record_run_start(ctx, job=job, dry_run=dry_run, settings=settings)
    except BaseException:
        release_store(ctx)
        raise


def _record_run_start(
    ctx: RunBase, *, job: str, dry_run: bool, settings: dict[str, object]
) -> None:
    store = ctx.store
    assert store is not None, "a run's store is open before its row is written"
    spec = ctx.loaded.spec
    store.record_spec(
        ctx.loaded.hash, spec.name, str(spec.version), ctx.loaded.text, canonical_json(spec)
    )
    store.record_pack(
        ctx.pack.pack_hash,
        json.dumps(ctx.pack.manifest, sort_keys=True),
        {name: (ctx.pack.file_hashes[name], data) for name, data in ctx.pack.files.items()},
    )
    provider_name, _, model_name = ctx.model_cfg.name.partition(":")
    store.start_run(
        {
            "run_id": ctx.run_id,
            "spec_hash": ctx.loaded.hash,
            "pack_hash": ctx.pack.pack_hash,
            "spec_name": spec.name,
            "job": job,
            "transport": ctx.transport,
            "provider": provider_name,
            "model": model_name,
            "workspace": str(ctx.workspace_root),
            "user_id": ctx.user_id,
            "flow_run_id": ctx.flow_run_id,
            "status": "running",
            "dry_run": dry_run,
            "turns": 0,
            "settings_json": json.dumps(
                {
                    "temperature": ctx.model_cfg.temperature,
                    "max_tokens": ctx.model_cfg.max_tokens,
                    "constrain": ctx.model_cfg.constrain,
                    # Who runs it: lets a later run tell a crashed run from a live one.
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    **settings,
                },
                sort_keys=True,
            ),
        }
    )
    settle_dead_runs(store, str(ctx.workspace_root), exclude=ctx.run_id)


def _process_gone(pid: int) -> bool:
    """True if no process ``pid`` runs here (a zombie counts as gone: it runs no code)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's live process
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False  # no /proc: alive is the safe answer


def settle_dead_runs(store: Store, workspace: str, *, exclude: str) -> list[str]:
    """Mark 'Failed' (``RUN_INTERRUPTED``) every 'running' run on ``workspace`` whose
    process, on this host, is gone; returns their ids.

    Conservative: a run without a recorded pid (older rows, other hosts) or whose
    pid is alive is left alone; a store error here never stops the new run.
    """
    host = socket.gethostname()
    settled: list[str] = []
    try:
        _, rows = store.query(
            "SELECT r.run_id, r.settings_json, "
            "(SELECT count(DISTINCT a.turn) FROM attempts a WHERE a.run_id = r.run_id) "
            "FROM runs r WHERE r.status = 'running' AND r.workspace = ? AND r.run_id <> ?",
            [workspace, exclude],
        )
    except StoreError:
        return settled
    for run_id, settings_json, turns in rows:
        try:
            who = json.loads(settings_json or "{}")
        except ValueError:
            continue
        pid = who.get("pid") if isinstance(who, dict) else None
        if not isinstance(pid, int) or who.get("host") != host or not _process_gone(pid):
            continue
        try:
            store.finish_run(
                run_id,
                status="Failed",
                error_code=RUN_INTERRUPTED,
                error_message=(
                    f"process {pid} ended without finishing the run (killed or crashed); "
                    "its attempts are kept, its notes were settled by the journal "
                    "(`toolwire undo` restores any it applied)"
                ),
                turns=int(turns or 0),
                operations=[],
                tool_calls=[],
                report_markdown=None,
            )
        except StoreError:
            continue  # another process settled it first
        settled.append(run_id)
    return settled


def settle_interrupted(
    store: Store,
    run_id: str,
    workspace: Path,
    why: str,
    notes_state: Callable[[Path, str], str | None] | None = None,
) -> str | None:
    """End a run stopped by Ctrl-C or SIGTERM ``Failed`` (``INTERRUPTED``), saying whether
    its notes were applied. ``notes_state`` is the job's journal reader (the librarian's
    ``journal_state``; None for a job that writes no journal): an apply is shielded from
    both signals, so it is whole or absent. Returns the message, or None if the run
    already ended."""
    try:
        _, rows = store.query(
            "SELECT r.status, (SELECT count(DISTINCT a.turn) FROM attempts a "
            "WHERE a.run_id = r.run_id) FROM runs r WHERE r.run_id = ?",
            [run_id],
        )
    except StoreError:
        return None
    if not rows or rows[0][0] != "running":
        return None
    try:
        state = notes_state(workspace, run_id) if notes_state is not None else None
    except (RunNotFound, WorkspaceError):
        state = None
    if state == "applied":
        message = f"{why}; its notes were applied (`toolwire undo {run_id}` restores them)"
    elif notes_state is not None:
        message = f"{why}; no note was changed"
    else:
        message = why
    try:
        store.finish_run(
            run_id,
            status="Failed",
            error_code=INTERRUPTED,
            error_message=message,
            turns=int(rows[0][1] or 0),
            operations=[],
            tool_calls=[],
            report_markdown=None,
        )
    except StoreError:
        return None
    return message
