"""`toolwire serve` follows its spec files: an edited cron or timezone is applied at once.

Prefect's ``serve`` registers each deployment's schedule when it starts and
never looks at the spec again: edit a spec's cron and the old schedule kept
firing (while each run moved the deployment's version to the new spec hash).
:class:`ScheduleWatcher` polls the served spec files; on a change it reloads
the spec and

* a new cron or timezone: updates the deployment's schedule on the Prefect
  server (which drops the runs it had planned under the old one);
* anything ``serve`` cannot follow while running (the spec no longer loads or
  fails its checks, lost its schedule, a cron that never fires, a new name,
  workspace or parameters): pauses the schedule and says why, so a changed
  spec never runs under a schedule it no longer has. Fixing the file resumes it
  (or, for what needs a new deployment, restart ``toolwire serve``).

Each decision is one line on the serve terminal.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolwire.errors import ToolwireError
from toolwire.run.preflight import cron_never_fires, preflight_issues
from toolwire.spec.model import LoadedSpec, load_spec

__all__ = ["ScheduleWatcher", "ServedSpec"]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class ServedSpec:
    """One served spec: its file, its deployment, and the schedule the server has."""

    path: Path
    deployment: str  # "<flow>/<spec name>"
    loaded: LoadedSpec
    cron: str
    timezone: str
    active: bool = True
    stamp: tuple[int, int] = (0, 0)  # (mtime_ns, size) of the file last read


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


class ScheduleWatcher(threading.Thread):
    """Polls the served spec files every ``interval_s`` seconds (a daemon thread)."""

    def __init__(
        self,
        served: list[ServedSpec],
        interval_s: float = 2.0,
        say: Callable[[str], None] = _say,
    ) -> None:
        super().__init__(name="toolwire-schedule-watch", daemon=True)
        self.served, self.interval_s, self.say = served, interval_s, say
        self.stopped = threading.Event()
        for entry in served:
            entry.stamp = _stamp(entry.path)

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            for entry in self.served:
                stamp = _stamp(entry.path)
                if stamp == entry.stamp:
                    continue
                try:
                    self.follow(entry)
                    entry.stamp = stamp
                except Exception as exc:  # noqa: BLE001 - the server may be busy: next poll
                    self.say(f"serve: {entry.path}: could not update the schedule yet: {exc}")

    def follow(self, entry: ServedSpec) -> None:
        """Apply the file's schedule to the deployment, or pause it saying why."""
        why = self._cannot_follow(entry)
        if why is not None:
            if entry.active:
                self._update(entry, active=False)
                entry.active = False
            self.say(f"serve: {entry.path} changed: {why}; schedule of {entry.deployment} paused")
            return
        loaded = load_spec(entry.path)
        schedule = loaded.spec.schedule
        assert schedule is not None  # _cannot_follow checked it
        if (schedule.cron, schedule.timezone) == (entry.cron, entry.timezone) and entry.active:
            entry.loaded = loaded
            return
        self._update(entry, active=True, cron=schedule.cron, timezone=schedule.timezone)
        entry.loaded, entry.cron, entry.timezone, entry.active = (
            loaded,
            schedule.cron,
            schedule.timezone,
            True,
        )
        self.say(
            f"serve: {entry.path} changed: {entry.deployment} now runs on "
            f"{schedule.cron!r} ({schedule.timezone})"
        )

    def _cannot_follow(self, entry: ServedSpec) -> str | None:
        try:
            loaded = load_spec(entry.path)
        except (ToolwireError, OSError) as exc:
            return f"it no longer loads ({str(exc).splitlines()[0]})"
        schedule, old = loaded.spec.schedule, entry.loaded.spec
        if schedule is None:
            return "it has no schedule any more"
        issues = preflight_issues(loaded)
        if issues:
            return f"{issues[0]}"
        never = cron_never_fires(schedule.cron, schedule.timezone)
        if never:
            return never
        assert old.schedule is not None
        if loaded.spec.name != old.name:
            return f"its name is now {loaded.spec.name!r} (restart `toolwire serve` to deploy it)"
        if (schedule.workspace, schedule.parameters) != (
            old.schedule.workspace,
            old.schedule.parameters,
        ):
            return "its workspace or parameters changed (restart `toolwire serve` to apply them)"
        return None

    def _update(
        self,
        entry: ServedSpec,
        *,
        active: bool,
        cron: str | None = None,
        timezone: str | None = None,
    ) -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.schedules import CronSchedule

        schedule = CronSchedule(cron=cron, timezone=timezone) if cron is not None else None
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(entry.deployment)
            for current in client.read_deployment_schedules(deployment.id):
                # Prefect drops the runs it planned under the old schedule on this update.
                client.update_deployment_schedule(
                    deployment.id, current.id, active=active, schedule=schedule
                )
