"""Issue 30 item 11: `--commit` ran the repository's `core.fsmonitor` command.

A workspace's `.git/config` can name commands git runs on the side of an
`add` or a `commit`: `core.fsmonitor`, a clean filter (with `.gitattributes`
sending every note through it), `diff.external`, a textconv, `gpg.program`
(with `commit.gpgsign` on). Each writes a marker when run. `git_commit` must
run none of them, and still make the commit with the run's notes; the same
key in the *user's* global configuration is the user's choice and does run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hostile.tally import Tally
from toolwire.librarian.journal.git_commit import GIT_COMMIT_REFUSED, git_commit

AREA = "issue 30: repository-configured commands"


@pytest.fixture(autouse=True)
def _users_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own git configuration is tmp_path/user.gitconfig (and no system one)."""
    for name in [k for k in os.environ if k.startswith("GIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "user.gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ)


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout


def _evil(tmp: Path, name: str) -> str:
    """A command that records that it ran (and, as a filter, passes its input through)."""
    script = tmp / f"evil-{name}"
    script.write_text(f"#!/bin/sh\necho ran >> '{tmp / ('ran-' + name)}'\ncat\n")
    script.chmod(0o755)
    return str(script)


HOSTILE_KEYS = {
    "fsmonitor": "core.fsmonitor",
    "clean": "filter.evil.clean",
    "smudge": "filter.evil.smudge",
    "external": "diff.external",
    "textconv": "diff.evil.textconv",
    "gpg": "gpg.program",
}


def _repo(tmp: Path, *, hostile_config: bool) -> tuple[Path, dict[str, str]]:
    ws = tmp / "ws"
    ws.mkdir()
    env = _env(tmp)
    (tmp / "user.gitconfig").write_text("[user]\n\tname = U\n\temail = u@example.org\n")
    (ws / "a.md").write_text("# A\n\nold\n")
    _git(ws, env, "init", "-q")
    _git(ws, env, "add", "-A")
    _git(ws, env, "commit", "-q", "-m", "start")
    if hostile_config:
        (ws / ".gitattributes").write_text("*.md filter=evil diff=evil\n")
        for name, key in HOSTILE_KEYS.items():
            _git(ws, env, "config", key, _evil(tmp, name))
    return ws, env


def test_item11_no_repository_configured_command_runs(tmp_path: Path, tally: Tally) -> None:
    ws, env = _repo(tmp_path, hostile_config=True)
    (ws / "a.md").write_text("# A\n\nnew\n")
    sha = git_commit(ws, "run-11", ["a.md"])
    assert sha and _git(ws, env, "rev-parse", "HEAD").strip() == sha
    assert _git(ws, env, "show", "--name-only", "--format=", "HEAD").split() == ["a.md"]
    ran = sorted(p.name for p in tmp_path.glob("ran-*"))
    assert ran == [], ran
    tally.add(AREA, "inputs tried", len(HOSTILE_KEYS))
    tally.add(AREA, "commands run", len(ran))


@pytest.mark.parametrize("sign", [False, True], ids=["plain", "gpgsign"])
def test_item11_the_opt_out_runs_none_either(tmp_path: Path, tally: Tally, sign: bool) -> None:
    ws, env = _repo(tmp_path, hostile_config=True)
    if sign:  # the repository asks for signing through its own gpg.program
        _git(ws, env, "config", "commit.gpgsign", "true")
    (ws / "a.md").write_text("# A\n\nnew\n")
    if sign:
        from toolwire.errors import WorkspaceError

        # With the rules followed, signing needs a signer: the repository's is not run,
        # git's default one has no key here, and the refusal says so.
        with pytest.raises(WorkspaceError) as refused:
            git_commit(ws, "run-11s", ["a.md"])
        assert refused.value.code == GIT_COMMIT_REFUSED
        assert "signing the commit failed" in refused.value.message
    assert git_commit(ws, "run-11n", ["a.md"], verify=False)
    ran = sorted(p.name for p in tmp_path.glob("ran-*"))
    assert ran == [], ran
    tally.add(AREA, "inputs tried", len(HOSTILE_KEYS))


def test_item11_the_users_own_fsmonitor_still_runs(tmp_path: Path, tally: Tally) -> None:
    ws, _ = _repo(tmp_path, hostile_config=False)
    hook = _evil(tmp_path, "user-fsmonitor")
    with (tmp_path / "user.gitconfig").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {hook}\n")
    (ws / "a.md").write_text("# A\n\nnew\n")
    assert git_commit(ws, "run-11u", ["a.md"])
    assert (tmp_path / "ran-user-fsmonitor").exists()  # the user's configuration allows it
    tally.add(AREA, "inputs tried")
