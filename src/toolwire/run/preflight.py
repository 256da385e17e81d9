"""What `run` and `serve` would reject in a spec that parses: checked up front, by `spec check`.

A spec can be valid YAML with valid values and still fail later: its prompt pack
folder is missing or broken, its ``replay:`` script or ``llamacpp:`` GGUF file is not
there, its schedule's
workspace does not exist, or its cron is one Prefect refuses (``0 25 * * *``
passes a field-by-field regex, not Prefect's ``croniter``). Each problem is a
SpecIssue at the key that causes it, so `spec check` prints it like any other.

The cron is checked with the code Prefect validates it with (its vendored
``croniter``), so what passes here is what ``serve`` can deploy, without paying
for importing Prefect.
"""

from __future__ import annotations

import importlib.util
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from toolwire.errors import PackError, SpecIssue, UsageError
from toolwire.prefect_settings import configure_prefect_env
from toolwire.promptpack.pack import load_pack
from toolwire.providers.llamacpp import BUNDLED_MODELS, resolve_model_path
from toolwire.providers.replay import load_script
from toolwire.spec.paths import workspace_outside
from toolwire.spec.yaml_index import LocationIndex, read_yaml

if TYPE_CHECKING:
    from toolwire.spec.model import LoadedSpec

__all__ = ["preflight_issues", "schedule_issues"]

# Flow parameters a spec's schedule.parameters may set (toolwire.flows.schedule uses them too).
SCHEDULE_PARAMETERS: tuple[str, ...] = ("model", "transport", "dry_run", "commit", "user")


def _index(loaded: LoadedSpec) -> LocationIndex | None:
    """Where each key sits in the file, for file:line:col (None if it cannot be re-read)."""
    try:
        return read_yaml(loaded.text, str(loaded.path or "<string>"))[1]
    except Exception:  # noqa: BLE001 - it loaded once; a location is a nicety
        return None


def _issue(
    loaded: LoadedSpec, index: LocationIndex | None, path: tuple[str, ...], msg: str
) -> SpecIssue:
    if index is not None:
        return index.issue(path, msg)
    return SpecIssue(str(loaded.path or "<string>"), None, None, ".".join(path), msg)


def preflight_issues(loaded: LoadedSpec) -> list[SpecIssue]:
    """Every problem `run` or `serve` would hit before the first model call."""
    index = _index(loaded)
    issues: list[SpecIssue] = []
    issues += _pack_issues(loaded, index)
    issues += _replay_issues(loaded, index)
    issues += _gguf_issues(loaded, index)
    issues += schedule_issues(loaded, index)
    return issues


def _pack_issues(loaded: LoadedSpec, index: LocationIndex | None) -> list[SpecIssue]:
    try:
        load_pack(loaded.pack_dir)
    except PackError as exc:
        return [_issue(loaded, index, ("prompt_pack",), exc.message)]
    return []


def _replay_issues(loaded: LoadedSpec, index: LocationIndex | None) -> list[SpecIssue]:
    path = loaded.replay_path
    if path is None:
        return []
    try:
        load_script(path)
    except UsageError as exc:
        return [_issue(loaded, index, ("model", "name"), exc.message)]
    return []


def _gguf_issues(loaded: LoadedSpec, index: LocationIndex | None) -> list[SpecIssue]:
    """A ``llamacpp:`` path to a GGUF file that is not there (a bundled name is the
    installed package's business: the same spec checks on a machine without it)."""
    model = loaded.spec.model
    if model.provider != "llamacpp" or model.target in BUNDLED_MODELS:
        return []
    try:
        resolve_model_path(model.target, loaded.base_dir)
    except UsageError as exc:
        return [_issue(loaded, index, ("model", "name"), exc.message)]
    return []


def schedule_issues(loaded: LoadedSpec, index: LocationIndex | None = None) -> list[SpecIssue]:
    """The schedule as ``serve`` deploys it: Prefect's cron, the workspace, the parameters."""
    schedule = loaded.spec.schedule
    if schedule is None:
        return []
    if index is None:
        index = _index(loaded)
    issues: list[SpecIssue] = []
    cron_problem = prefect_cron_problem(schedule.cron, schedule.timezone)
    if cron_problem:
        issues.append(_issue(loaded, index, ("schedule", "cron"), cron_problem))
    workspace = loaded.resolve(schedule.workspace)
    outside = workspace_outside(loaded)  # a spec does not choose a folder on its own
    if outside is not None:
        issues.append(_issue(loaded, index, ("schedule", "workspace"), outside))
    elif not workspace.is_dir():
        issues.append(_issue(loaded, index, ("schedule", "workspace"), f"no folder at {workspace}"))
    unknown = sorted(set(schedule.parameters) - set(SCHEDULE_PARAMETERS))
    if unknown:
        issues.append(
            _issue(
                loaded,
                index,
                ("schedule", "parameters"),
                f"unknown keys {unknown}; allowed: {', '.join(SCHEDULE_PARAMETERS)}",
            )
        )
    chosen = schedule.parameters.get("transport")
    librarian = loaded.spec.transport == "xml_attrless"
    if isinstance(chosen, str) and (chosen == "xml_attrless") != librarian:
        # The flow would run the spec as the other job and fail when the schedule fires.
        kind = "librarian" if librarian else "tool-agent"
        issues.append(
            _issue(
                loaded,
                index,
                ("schedule", "parameters", "transport"),
                f"a {kind} spec (transport {loaded.spec.transport}) cannot run over {chosen!r}",
            )
        )
    params = schedule.parameters
    if params.get("commit") is True and (
        params.get("dry_run") is True or not in_git_repository(workspace)
    ):
        # As `run --commit` refuses: else the notes were applied and nothing was committed.
        why = "with dry_run nothing is written" if params.get("dry_run") else (
            f"{workspace} is not in a git repository")  # fmt: skip
        issues.append(
            _issue(loaded, index, ("schedule", "parameters", "commit"), f"cannot commit: {why}")
        )
    planning = sorted({"dry_run", "commit"} & set(schedule.parameters))
    if loaded.spec.transport != "xml_attrless" and planning:
        # A tool agent's flow has no such parameters: its tools write as they run.
        issues.append(
            _issue(
                loaded,
                index,
                ("schedule", "parameters"),
                f"{', '.join(planning)} apply to librarian (xml_attrless) runs only",
            )
        )
    return issues


def in_git_repository(folder: Path) -> bool:
    """A ``.git`` in or above ``folder`` (looked for: no git command runs here)."""
    folder = folder.resolve()
    return any((p / ".git").exists() for p in (folder, *folder.parents))


def prefect_cron_problem(cron: str, timezone: str) -> str | None:
    """Prefect's verdict on a cron string (None when it accepts it).

    Prefect validates a cron with its vendored ``croniter`` (``is_valid``, and no
    random/hashed ``R``/``H`` fields). Importing Prefect costs 1-4 s, which would
    make `spec check` slow in an editor, so that same croniter file is loaded on its
    own; if Prefect ever moves it, Prefect's ``CronSchedule`` model decides instead.
    tests/local/test_cli_preflight.py checks both give the same verdicts.
    """
    croniter = _prefect_croniter()
    if croniter is None:
        return _prefect_model_problem(cron, timezone)
    if not croniter.is_valid(cron):
        return f"Prefect rejects {cron!r}: Invalid cron string"
    if any(field.casefold() in ("r", "h") for field in cron.split()):
        return f"Prefect rejects {cron!r}: random and hashed expressions are unsupported"
    return None


def _prefect_croniter() -> Any:
    """The ``croniter`` class Prefect validates with, loaded without importing Prefect."""
    name = "toolwire._prefect_croniter"
    if name not in sys.modules:
        found = importlib.util.find_spec("prefect")  # locates the package, runs nothing
        if found is None or found.origin is None:
            return None
        path = Path(found.origin).parent / "_vendor" / "croniter" / "croniter.py"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None or not path.is_file():
            return None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:  # noqa: BLE001 - a changed file: fall back to Prefect itself
            return None
        sys.modules[name] = module
    return getattr(sys.modules[name], "croniter", None)


def _prefect_model_problem(cron: str, timezone: str) -> str | None:
    configure_prefect_env()  # quiet and offline before Prefect is imported
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        reason = exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
        return f"Prefect rejects {cron!r}: {reason}"
    return None


def cron_never_fires(cron: str, timezone: str) -> str | None:
    """A warning when Prefect would accept ``cron`` but never fire it (``0 0 31 2 *``:
    February has no 31st), else None. Asked of the same croniter Prefect schedules with,
    from now in the schedule's timezone: it gives up when no date matches."""
    croniter = _prefect_croniter()
    if croniter is None or prefect_cron_problem(cron, timezone):
        return None  # no croniter to ask; or a cron Prefect refuses (an error already)
    try:
        start = datetime.now(ZoneInfo(timezone or "UTC"))
    except (ZoneInfoNotFoundError, ValueError):
        return None
    try:
        croniter(cron, start, day_or=True).get_next(datetime)
    except Exception:  # noqa: BLE001 - CroniterBadDateError: no date ever matches
        return f"cron {cron!r} never fires (no date matches it); the schedule would never run"
    return None
