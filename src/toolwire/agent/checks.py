"""A spec's ``checks``: did the run do its job? Evaluated when the model says it is done.

A model can end a run with a confident final report and nothing done (a 135M
model says "Done" after listing a folder). A check turns "the job asked for
this file, listing these files" into data: each ``checks`` entry names a file
that must exist (read through the confined file layer: never outside the
workspace, never through a link out) and, with ``lists``, a glob whose every
match the file must name by its workspace-relative path, or with ``contains``
a text it must hold. A check on the final answer (``answer_matches``: a regex
searched in its text; ``answer_schema``: a JSON Schema its JSON must satisfy)
proves a read or search task, which leaves no file. A failed check makes the run
``Failed`` with ``RUN_CHECK_FAILED`` and says what is missing; a run whose spec
declares no check ends ``unchecked`` (``run_outcome``): the model said it was
done and nothing proved it (issue 46: 17 of 18 runs ended ``ok``, 6 had done
their task).

A check must be able to fail: a ``lists`` glob that matches no file fails
(``note/**/*.md`` for ``notes/`` would otherwise pass whatever the run did),
and paths are workspace-relative (``spec check`` refuses absolute paths and
``..``; ``spec_sections.workspace_path_problem`` is the one rule both use). The glob is matched
against a walk of the workspace that follows no link and skips hidden
folders, never against the file system at large, and whatever goes wrong
while checking (a folder too deep to walk, an unreadable file) is a failed
check, never a traceback.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from toolwire.domain import FinalReport
from toolwire.errors import ToolwireError, WorkspaceError
from toolwire.files.confined import Confined
from toolwire.spec.model import CheckSpec
from toolwire.spec.sections import workspace_path_problem as path_problem

__all__ = [
    "RUN_CHECK_FAILED",
    "UNCHECKED",
    "answer_problem",
    "check_problems",
    "glob_matches",
    "path_problem",
    "run_checks",
    "run_outcome",
]

RUN_CHECK_FAILED = "RUN_CHECK_FAILED"
UNCHECKED = "unchecked"  # the run's status when nothing was there to prove it done
MAX_CHECKED_BYTES = 4 * 1024 * 1024  # an index is small; a huge file is not read whole
MAX_NAMED = 5  # missing paths quoted in the message
MAX_WALKED = 200_000  # entries looked at for one glob; a workspace beyond that is refused


def _component_match(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """Path components against glob components; ``**`` spans zero or more folders."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_component_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _component_match(parts[1:], rest)


def glob_matches(root: Path, pattern: str, *, exclude: str = "") -> list[str]:
    """Workspace-relative posix paths of the regular files matching ``pattern``.

    Hidden files and folders are skipped and no link is followed. Raises
    WorkspaceError when the pattern is not workspace-relative or the walk
    is too large or too deep to finish.
    """
    problem = path_problem(pattern)
    if problem is not None:
        raise WorkspaceError(f"glob {pattern!r} {problem}")
    wanted = [p for p in pattern.split("/") if p not in ("", ".")]
    depth = None if "**" in wanted else len(wanted)
    found: list[str] = []
    walked = 0
    try:
        with Confined(root) as fs:
            for rel, dirs, files, _fd in fs.walk():
                level = len(rel.split("/")) if rel else 0
                walked += len(dirs) + len(files)
                if walked > MAX_WALKED:
                    raise WorkspaceError(f"more than {MAX_WALKED} entries to match {pattern!r}")
                keep = depth is None or level + 1 < depth
                dirs[:] = sorted(d for d in dirs if keep and not d.startswith("."))
                for name in files:
                    path = f"{rel}/{name}" if rel else name
                    if name.startswith(".") or path == exclude:
                        continue
                    if _component_match(path.split("/"), wanted):
                        found.append(path)
    except RecursionError:
        raise WorkspaceError(f"folders too deep to match {pattern!r}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot walk the workspace to match {pattern!r}: {exc}") from None
    # fwalk reports regular files and links alike: keep the regular files.
    return sorted(p for p in found if (root / p).is_file() and not (root / p).is_symlink())


def _answer_value(answer: FinalReport) -> tuple[str, Any]:
    """The answer's text (for a regex) and its JSON value (for a schema; a text that is
    not JSON stays text, which an object schema then refuses)."""
    content = answer.content
    if not isinstance(content, str):
        return json.dumps(content, ensure_ascii=False, default=str), content
    try:
        return content, json.loads(content)
    except ValueError:
        return content, content


def answer_problem(check: CheckSpec, answer: FinalReport | None) -> str | None:
    """Why the final answer fails ``check`` (an ``answer_*`` check), or None."""
    if answer is None:
        return "there is no final answer to check"
    text, value = _answer_value(answer)
    if check.answer_matches is not None and not re.search(check.answer_matches, text):
        shown = " ".join(text.split())[:120]
        return f"the answer does not match {check.answer_matches!r}: {shown!r}"
    if check.answer_schema is not None:
        error = next(iter(Draft202012Validator(check.answer_schema).iter_errors(value)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the answer"
            return f"the answer fails its JSON Schema at {where}: {error.message[:160]}"
    return None


def _check_one(
    check: CheckSpec, root: Path, confined: Confined, answer: FinalReport | None
) -> str | None:
    if check.file is None:
        return answer_problem(check, answer)
    problem = path_problem(check.file)
    if problem is not None:
        return f"{check.file} {problem}"
    try:
        data = confined.read_bytes(check.file, limit=MAX_CHECKED_BYTES)
    except (OSError, WorkspaceError) as exc:
        return f"{check.file} cannot be read: {getattr(exc, 'message', exc)}"
    if data is None:
        return f"{check.file} does not exist"
    if check.contains is not None and check.contains not in data.decode("utf-8", "replace"):
        return f"{check.file} does not contain {check.contains!r}"
    if check.lists is None:
        return None
    try:
        matches = glob_matches(root, check.lists, exclude=check.file)
    except WorkspaceError as exc:
        return f"{check.file}: {exc.message}"
    if not matches:
        return f"{check.lists} matches no file, so {check.file} cannot be checked against it"
    text = data.decode("utf-8", errors="replace")
    missing = [p for p in matches if p not in text]
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_NAMED])
    more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
    return (
        f"{check.file} does not list {len(missing)} of the files "
        f"matching {check.lists}: {shown}{more}"
    )


def check_problems(
    checks: Sequence[CheckSpec], root: Path, answer: FinalReport | None = None
) -> list[str]:
    """One line per failed check (empty when every check holds)."""
    problems: list[str] = []
    try:
        with Confined(root) as confined:
            for check in checks:
                problem = _check_one(check, root, confined, answer)
                if problem is not None:
                    problems.append(problem)
    except (OSError, WorkspaceError, RecursionError) as exc:
        problems.append(f"the workspace cannot be checked: {getattr(exc, 'message', exc)}")
    return problems


def run_checks(
    checks: Sequence[CheckSpec], root: Path, answer: FinalReport | None = None
) -> ToolwireError | None:
    """The run's failure when a check fails, else None (never raises for a bad check)."""
    if not checks:
        return None
    problems = check_problems(checks, root, answer)
    if not problems:
        return None
    return ToolwireError(
        "the run ended without doing its job: " + "; ".join(problems), code=RUN_CHECK_FAILED
    )


def run_outcome(
    checks: Sequence[CheckSpec], root: Path, answer: FinalReport | None
) -> tuple[str, ToolwireError | None]:
    """The status of a run whose model gave a final answer: ``ok`` when the spec's checks
    held, ``Failed`` when one did not, ``unchecked`` when there was none to hold."""
    if not checks:
        return UNCHECKED, None
    failed = run_checks(checks, root, answer)
    return ("ok", None) if failed is None else ("Failed", failed)
