"""A spec's ``checks``: did the run do its job? Evaluated on the workspace when it ends.

A model can end a run with a confident final report and nothing done (a 135M
model says "Done" after listing a folder). A check turns "the job asked for
this file, listing these files" into data: each ``checks`` entry names a file
that must exist (read through the confined file layer: never outside the
workspace, never through a link out) and, with ``lists``, a glob whose every
match the file must name by its workspace-relative path. A failed check makes
the run ``Failed`` with ``RUN_CHECK_FAILED`` and says what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolwire.errors import ToolwireError, WorkspaceError
from toolwire.librarian.confined import Confined
from toolwire.spec import CheckSpec

__all__ = ["RUN_CHECK_FAILED", "check_problems", "run_checks"]

RUN_CHECK_FAILED = "RUN_CHECK_FAILED"
MAX_CHECKED_BYTES = 4 * 1024 * 1024  # an index is small; a huge file is not read whole
MAX_NAMED = 5  # missing paths quoted in the message


def _matches(root: Path, pattern: str, exclude: str) -> list[str]:
    """Workspace-relative posix paths matching ``pattern`` (hidden parts skipped)."""
    found = []
    for path in sorted(root.glob(pattern)):
        rel = path.relative_to(root).as_posix()
        if rel != exclude and path.is_file() and not any(p.startswith(".") for p in rel.split("/")):
            found.append(rel)
    return found


def check_problems(checks: Sequence[CheckSpec], root: Path) -> list[str]:
    """One line per failed check (empty when every check holds)."""
    problems: list[str] = []
    with Confined(root) as confined:
        for check in checks:
            try:
                data = confined.read_bytes(check.file, limit=MAX_CHECKED_BYTES)
            except (OSError, WorkspaceError) as exc:
                problems.append(f"{check.file} cannot be read: {exc}")
                continue
            if data is None:
                problems.append(f"{check.file} does not exist")
                continue
            if check.lists is None:
                continue
            text = data.decode("utf-8", errors="replace")
            missing = [p for p in _matches(root, check.lists, check.file) if p not in text]
            if missing:
                shown = ", ".join(missing[:MAX_NAMED])
                more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
                problems.append(
                    f"{check.file} does not list {len(missing)} of the files "
                    f"matching {check.lists}: {shown}{more}"
                )
    return problems


def run_checks(checks: Sequence[CheckSpec], root: Path) -> ToolwireError | None:
    """The run's failure when a check fails, else None."""
    if not checks:
        return None
    problems = check_problems(checks, root)
    if not problems:
        return None
    return ToolwireError(
        "the run ended without doing its job: " + "; ".join(problems), code=RUN_CHECK_FAILED
    )
