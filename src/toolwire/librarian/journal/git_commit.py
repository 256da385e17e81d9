"""`--commit`: commit a run's notes the way the user's own `git commit` would, and revert it.

By default the repository's rules hold, as for any commit the user makes: its
hooks run (pre-commit, commit-msg, post-commit) and ``commit.gpgsign`` signs.
When a hook refuses or signing fails, the commit is not made and the error
says so (the notes stay changed, their operations stored as applied;
``--commit-no-verify`` is the explicit opt-out, like ``git commit --no-verify``,
and it also skips signing). A revert follows the rules of the commit it reverts.

What the repository's *own config* would run on the side is another matter: a
workspace's ``.git/config`` may name commands (``core.fsmonitor``, a clean
filter, ``diff.external``, ``gpg.program``...) that `git add` or `git commit`
runs without anyone asking. Such a key is overridden with a harmless value
unless the user's configuration (global or system scope, or the command
environment) sets it: a spec never gets a command run through the folder it
works on (issue 30 item 11).

The message lists what changed, one line per note and field (``old -> new``),
and ends with ``toolwire-run: <id>``, which is how :func:`revert_commit` finds
the commit to revert after ``toolwire undo``.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from toolwire.errors import WorkspaceError
from toolwire.files.confined import Confined
from toolwire.files.paths import normalize_rel_path

__all__ = ["GIT_COMMIT_REFUSED", "commit_message", "git_commit", "revert_commit"]

GIT_COMMIT_REFUSED = "GIT_COMMIT_REFUSED"
RUN_TRAILER = "toolwire-run"
# On a `--commit-no-verify` commit: its revert (`toolwire undo`) skips hooks and signing
# too. Without it the revert of an unsigned run tried to sign, and failed (issue 47).
NO_VERIFY_TRAILER = "toolwire-no-verify"
MAX_LISTED = 200  # message lines; a run over thousands of notes says how many more

# Repository-config keys whose value is a command git may run during add/commit, and
# the value that runs nothing (fsmonitor: off; the programs: git's own defaults).
_COMMAND_KEYS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"core\.fsmonitor"), "false"),
    (re.compile(r"core\.(sshcommand|askpass|editor|pager)"), ""),
    (re.compile(r"sequence\.editor|diff\.external|credential\.helper"), ""),
    (re.compile(r"diff\.[^.]+\.(command|textconv)"), ""),
    (re.compile(r"filter\.[^.]+\.(clean|smudge|process)"), ""),
    (re.compile(r"gpg\.program|gpg\.openpgp\.program"), "gpg"),
    (re.compile(r"gpg\.ssh\.program"), "ssh-keygen"),
    (re.compile(r"gpg\.x509\.program"), "gpgsm"),
    (re.compile(r"gpg\.ssh\.defaultkeycommand"), ""),
)
_USER_SCOPES = ("global", "system", "command")


class NoteChange(Protocol):
    """One changed field of one note (``summary.FieldChange``)."""

    @property
    def path(self) -> str: ...
    @property
    def field(self) -> str: ...
    @property
    def old(self) -> str: ...
    @property
    def new(self) -> str: ...


_USER_ENV = ("GIT_CONFIG", "GIT_AUTHOR_", "GIT_COMMITTER_")  # the user's own choices


def _env() -> dict[str, str]:
    # A clean environment: no GIT_DIR/GIT_WORK_TREE leaking in, no pager, no prompts; the
    # user's configuration (GIT_CONFIG_GLOBAL...) and identity stay theirs.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith(_USER_ENV)
    }
    env.update(GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", LC_ALL="C")
    return env


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Paths are literal: a model's `diar?.md` is that name, never a glob for diary.md.
    return subprocess.run(
        ["git", "--literal-pathspecs", *args],
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,  # a hook (tests, linters) may take a while
        check=False,
    )


def _overrides(root: Path) -> list[str]:
    """``-c key=value`` for every command-running key the repository's own config sets.

    Reading the config runs nothing (``git config`` neither starts fsmonitor nor
    filters). A key set at a user scope is the user's choice and stays. Hooks are
    not config commands but the repository's rules: they run (unless opted out).
    """
    listed = _git(root, "config", "--show-scope", "--null", "--list")
    if listed.returncode != 0:
        return ["-c", "core.fsmonitor=false"]
    user: set[str] = set()
    local: set[str] = set()
    fields = listed.stdout.split("\0")  # scope NUL key LF value NUL, per entry
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key = entry.partition("\n")[0].lower()
        if scope in _USER_SCOPES:
            user.add(key)
        elif scope:
            local.add(key)
    flags = ["-c", "core.fsmonitor=false"] if "core.fsmonitor" not in user else []
    for key in sorted(local):
        if key in user or key == "core.fsmonitor":
            continue
        for pattern, harmless in _COMMAND_KEYS:
            if pattern.fullmatch(key):
                flags += ["-c", f"{key}={harmless}"]
                break
    return flags


def _first_lines(text: str, n: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[:n])[:400]


def _why_refused(output: str) -> str:
    low = output.lower()
    if "gpg" in low or "sign" in low:
        return "signing the commit failed (commit.gpgsign is set)"
    return "a hook of the repository refused the commit"


def commit_message(
    run_id: str, changes: Sequence[NoteChange], verb: str = "changed", *, verify: bool = True
) -> str:
    """Subject, one line per changed field (``path: field old -> new``), the run trailer
    (and, for ``--commit-no-verify``, the trailer its revert reads to skip hooks too)."""
    notes = len({c.path for c in changes})
    subject = f"toolwire: {notes} note{'s' if notes != 1 else ''} {verb} (run {run_id[:8]})"
    lines = [f"- {c.path}: {c.field} {_short(c.old)} -> {_short(c.new)}" for c in changes]
    if len(lines) > MAX_LISTED:
        lines = lines[:MAX_LISTED] + [f"- ... and {len(lines) - MAX_LISTED} more"]
    body = "\n".join(lines)
    trailers = f"{RUN_TRAILER}: {run_id}\n" + ("" if verify else f"{NO_VERIFY_TRAILER}: true\n")
    return f"{subject}\n\n{body}\n\n{trailers}" if body else f"{subject}\n\n{trailers}"


def _short(value: str | None) -> str:
    text = " ".join((value or "").split()) or "-"
    return text if len(text) <= 80 else text[:79] + "…"


def _in_work_tree(root: Path) -> bool:
    probe = _git(root, "rev-parse", "--is-inside-work-tree")
    return probe.returncode == 0 and probe.stdout.strip() == "true"


_RUN_REMEDY = (
    "The notes are changed but not committed: fix that and commit them, `toolwire undo` "
    "the run, or run again with --commit-no-verify (no hooks, no signing)"
)
_UNDO_REMEDY = "The notes are restored but the revert is not committed: commit it yourself"


def _commit(
    root: Path, paths: Sequence[str], message: str, *, verify: bool, remedy: str = _RUN_REMEDY
) -> str | None:
    """Stage and commit exactly ``paths``; the new sha, or None when nothing of ours differs."""
    with Confined(root) as fs:  # keep .toolwire/ (journal, trash) out of the user's git
        fs.make_folders(".toolwire")
        fs.create_once(".toolwire/.gitignore", b"*\n")
    flags = _overrides(root)
    if not verify:  # the explicit opt-out: no hook of any kind, no signing
        flags += ["-c", f"core.hooksPath={os.devnull}", "-c", "commit.gpgsign=false"]
    if _git(root, "config", "user.email").returncode != 0:
        flags += ["-c", "user.name=toolwire", "-c", "user.email=toolwire@localhost"]
    rels = [normalize_rel_path(p) for p in paths]
    added = _git(root, *flags, "add", "-A", "--", *rels)
    if added.returncode != 0:  # a stale index.lock, a note in a submodule (issue 45 #17)
        raise WorkspaceError(
            f"git add failed: {_first_lines(added.stderr) or 'no output'}. {remedy}",
            code=GIT_COMMIT_REFUSED,
        )
    if _git(root, *flags, "diff", "--cached", "--quiet", "--", *rels).returncode == 0:
        return None
    # The message as an argument: a hook may read stdin (an fsmonitor hook that did ate
    # a message given on stdin, and the commit aborted as empty).
    args = ["commit", "-q", "-m", message, "--", *rels]
    if not verify:
        args.insert(1, "--no-verify")
    done = _git(root, *flags, *args)
    if done.returncode != 0:
        output = done.stderr + done.stdout
        raise WorkspaceError(
            f"{_why_refused(output)}: {_first_lines(output) or 'no output'}. {remedy}",
            code=GIT_COMMIT_REFUSED,
        )
    return _git(root, "rev-parse", "HEAD").stdout.strip()


def git_commit(
    ws_root: str | os.PathLike[str],
    run_id: str,
    paths: Sequence[str],
    changes: Sequence[NoteChange] = (),
    *,
    verify: bool = True,
) -> str | None:
    """Commit a run's ``paths`` if the workspace is in a git work tree; the sha or None.

    Only those paths are committed, taken literally; whatever else is staged stays
    staged. ``verify=False`` skips hooks and signing (``--commit-no-verify``).
    """
    root = Path(ws_root).resolve()
    if not paths or not _in_work_tree(root):
        return None
    message = commit_message(run_id, changes, verify=verify)
    return _commit(root, paths, message, verify=verify)


def revert_commit(ws_root: str | os.PathLike[str], run_id: str, paths: Sequence[str]) -> str | None:
    """After ``undo`` restored a committed run's notes: commit them as a revert of the
    run's commit (found by its ``toolwire-run:`` trailer), by the same rules: hooks and
    signing unless that commit was made with ``--commit-no-verify``. None when the run
    made no commit or nothing differs from HEAD."""
    root = Path(ws_root).resolve()
    if not paths or not _in_work_tree(root):
        return None
    found = _git(
        root, "log", "--format=%H", "--fixed-strings", f"--grep={RUN_TRAILER}: {run_id}", "-n1"
    )
    sha = found.stdout.strip()
    if found.returncode != 0 or not sha:
        return None
    subject = _git(root, "log", "--format=%s", "-n1", sha).stdout.strip()
    verify = (
        f"\n{NO_VERIFY_TRAILER}: true\n" not in _git(root, "log", "--format=%B", "-n1", sha).stdout
    )
    message = (
        f'Revert "{subject}"\n\nThis reverts commit {sha}\n(`toolwire undo {run_id}`).\n\n'
        f"{RUN_TRAILER}-undone: {run_id}\n" + ("" if verify else f"{NO_VERIFY_TRAILER}: true\n")
    )
    return _commit(root, paths, message, verify=verify, remedy=_UNDO_REMEDY)
