"""Spec schedules as Prefect deployments: `toolwire serve` is Prefect's `serve`, nothing home-made.

A spec's ``schedule`` (cron, timezone, workspace, parameters) becomes one
deployment of its job's flow (``toolwire.jobs``: ``librarian`` or ``agent``)
named after the spec, so ``prefect deployment run librarian/<spec-name>`` (or
``agent/<spec-name>``) triggers it by hand. The
deployment's version is the spec hash: a run's flow run leads back to the
exact YAML in the store's ``specs`` table. Cron needs a Prefect server
(``prefect server start``); without one Prefect's ``serve`` only warns and the
schedule never fires, so :func:`serve_specs` refuses to start instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from toolwire.errors import SpecError, UsageError
from toolwire.flows.schedule_watch import ScheduleWatcher, ServedSpec
from toolwire.jobs import job_for
from toolwire.run.base import resolve_loaded
from toolwire.run.preflight import SCHEDULE_PARAMETERS as _PREFLIGHT_PARAMETERS
from toolwire.run.preflight import cron_never_fires, preflight_issues
from toolwire.spec.model import load_spec
from toolwire.spec.paths import workspace_outside
from toolwire.spec.settings import load_settings

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

    from toolwire.spec.model import LoadedSpec

__all__ = [
    "SCHEDULE_PARAMETERS",
    "build_deployment",
    "deployment_parameters",
    "find_specs",
    "scheduled_specs",
    "serve_specs",
]

# Flow parameters a spec's schedule.parameters may set (spec_path and workspace come
# from the spec itself; db from `serve --db`).
SCHEDULE_PARAMETERS = _PREFLIGHT_PARAMETERS
_SPEC_SUFFIXES = (".yaml", ".yml")


def find_specs(paths: Sequence[str | Path]) -> list[tuple[Path, bool]]:
    """Spec files to consider, each with whether the user named it explicitly.

    A folder contributes its ``*.yaml``/``*.yml`` files (not recursively).
    """
    found: list[tuple[Path, bool]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [(p, False) for p in sorted(path.iterdir()) if p.suffix in _SPEC_SUFFIXES]
        elif path.is_file():
            found.append((path, True))
        else:
            raise UsageError(f"no spec file or folder at {path}")
    return found


def scheduled_specs(paths: Sequence[str | Path]) -> list[LoadedSpec]:
    """Load the specs under ``paths`` that have a schedule.

    A spec named explicitly must have one (serving it would do nothing); specs
    found in a folder without one are skipped. An invalid spec is an error either
    way: silently not serving a broken nightly job is worse than refusing to start.
    """
    specs = []
    for path, explicit in find_specs(paths):
        loaded = load_spec(path)
        if loaded.spec.schedule is None:
            if explicit:
                raise UsageError(f"{path}: the spec has no schedule; add schedule.cron to serve it")
            continue
        # What `spec check` reports: a cron Prefect refuses, a missing workspace or pack.
        issues = preflight_issues(loaded)
        if issues:
            raise SpecError(issues)
        specs.append(loaded)
    names = [s.spec.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"two scheduled specs are named {duplicates[0]!r}: deployment names clash")
    return specs


def deployment_parameters(loaded: LoadedSpec, *, db: str | Path | None = None) -> dict[str, object]:
    """The flow parameters of a scheduled spec: absolute paths, plus schedule.parameters."""
    schedule = loaded.spec.schedule
    if schedule is None or loaded.path is None:
        raise UsageError(f"spec {loaded.spec.name!r} has no schedule (or no file) to deploy")
    unknown = sorted(set(schedule.parameters) - set(SCHEDULE_PARAMETERS))
    if unknown:
        raise UsageError(
            f"{loaded.path}: schedule.parameters has unknown keys {unknown}; "
            f"allowed: {', '.join(SCHEDULE_PARAMETERS)}"
        )
    outside = workspace_outside(loaded, serving=True)  # issue 30 item 7 (spec_paths)
    if outside is not None:
        raise UsageError(f"{loaded.path}: {outside}")
    # Absolute paths: the served flow runs in a subprocess that may not share our cwd.
    db_path = Path(db) if db is not None else load_settings().db
    return {
        "spec_path": str(loaded.path.resolve()),
        "workspace": str(loaded.resolve(schedule.workspace)),
        "db": str(db_path.expanduser().resolve()),
        **schedule.parameters,
    }


def build_deployment(loaded: LoadedSpec, *, db: str | Path | None = None) -> RunnerDeployment:
    """A Prefect RunnerDeployment of the spec's job's flow, for one scheduled spec."""
    from prefect.deployments.runner import EntrypointType, RunnerDeployment
    from prefect.schedules import Cron

    from toolwire.flows.job_flows import flow_for

    spec = loaded.spec
    assert spec.schedule is not None and loaded.path is not None  # from scheduled_specs()
    job = job_for(resolve_loaded(loaded, load_settings()))
    deployment = flow_for(job).to_deployment(
        name=spec.name,
        schedules=[Cron(spec.schedule.cron, timezone=spec.schedule.timezone)],
        parameters=deployment_parameters(loaded, db=db),
        description=spec.description or None,
        version=loaded.hash,
        tags=["toolwire", f"spec:{spec.name}", f"job:{job.name}"],
        # Module path, not file path: the flow is importable from the installed package.
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    assert isinstance(deployment, RunnerDeployment)  # sync caller: never a coroutine
    return deployment


def _require_api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise UsageError(
            "no Prefect server to schedule on: start one with "
            "`prefect server start --host 127.0.0.1 --port 4200` and set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    _require_answer(str(url))
    return str(url)


def _require_answer(url: str) -> None:
    """The server at PREFECT_API_URL answers its health check: an unreachable one made
    `serve` print httpx's traceback (safety round four)."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/health", timeout=30.0)
    except (httpx.HTTPError, ValueError) as exc:  # ValueError: not a URL httpx can use
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(
            f"no Prefect server answers at PREFECT_API_URL={url} ({reason}): start it "
            "(`prefect server start`) or fix the URL"
        ) from None
    if response.status_code >= 400:
        raise UsageError(
            f"PREFECT_API_URL={url} answered {response.status_code} to a health check: "
            "is it a Prefect server's API (…/api)?"
        )


def serve_specs(
    paths: Sequence[str | Path],
    *,
    db: str | Path | None = None,
    limit: int | None = None,
    watch_interval_s: float = 2.0,
) -> None:
    """Serve every scheduled spec under ``paths`` until interrupted (Prefect's ``serve``).

    ``limit`` caps concurrent flow runs across these deployments. The spec files are
    re-read every ``watch_interval_s`` seconds: an edited cron or timezone is applied,
    a change that cannot be pauses the schedule (``toolwire.flows.schedule_watch``).
    """
    specs = scheduled_specs(paths)
    if not specs:
        raise UsageError(f"no spec with a schedule in {', '.join(map(str, paths))}")
    _require_api_url()
    deployments = [build_deployment(loaded, db=db) for loaded in specs]
    for loaded in specs:
        assert loaded.spec.schedule is not None
        never = cron_never_fires(loaded.spec.schedule.cron, loaded.spec.schedule.timezone)
        if never:
            print(f"warning: {loaded.path}: schedule.cron: {never}", file=sys.stderr, flush=True)

    from prefect import serve

    # Prefect's serve never re-reads a spec: the watcher applies an edited cron/timezone.
    watcher = ScheduleWatcher(
        [
            ServedSpec(loaded.path, f"{d.flow_name}/{d.name}", loaded, s.cron, s.timezone)
            for loaded, d in zip(specs, deployments, strict=True)
            if loaded.path is not None and (s := loaded.spec.schedule) is not None
        ],
        interval_s=watch_interval_s,
    )
    watcher.start()
    try:
        serve(*deployments, limit=limit, print_starting_message=True)
    finally:
        watcher.stop()
