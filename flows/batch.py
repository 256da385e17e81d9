"""Prefect entry point for batch runs (`flows/prefect.yaml`, deployment `batch-replay`).

Thin on purpose: `toolwire.flows.batch.run_batch` plans the cross product and runs it
as the `toolwire-batch` flow (here a subflow) with the chosen task runner, so
the CLI (`toolwire batch`), tests and deployments all run the same code.
"""

from __future__ import annotations

from prefect import flow
from prefect.states import Failed, State

from toolwire.flows.batch import run_batch

__all__ = ["batch"]


@flow(name="batch", log_prints=False, persist_result=False)
def batch(
    spec_path: str,
    workspaces: list[str],
    models: list[str] | None = None,
    transports: list[str] | None = None,
    db: str | None = None,
    task_runner: str = "threads",
    max_workers: int = 2,
    dry_run: bool = True,
    check: bool = False,
) -> dict[str, object] | State:
    """Run a batch; returns its counts (the runs themselves are in the store), or ends
    ``Failed`` with the counts as its message when a run failed or was lost."""
    result = run_batch(
        spec_path,
        workspaces,
        models=models,
        transports=transports,
        db=db,
        task_runner=task_runner,
        max_workers=max_workers,
        dry_run=dry_run,
        check=check,
    )
    if not result.ok:
        return Failed(message=f"batch {result.batch_id}: {result.counts()}")
    return {
        "batch_id": result.batch_id,
        "planned": result.planned,
        "finished": result.finished,
        "failed": result.failed,
        "lost": result.lost,
        "quality_ok": None if result.quality is None else result.quality.ok,
    }


if __name__ == "__main__":
    import sys

    print(batch(sys.argv[1], sys.argv[2:]))
