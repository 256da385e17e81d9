"""Issue 33 item 5: `--commit` follows the repository's rules, says what changed, and undoes.

Real git repositories with real hooks: a failing pre-commit hook refuses the
commit (one line, code GIT_COMMIT_REFUSED, the notes applied and HEAD where it
was) unless the user opts out with --commit-no-verify; `commit.gpgsign` signs
(a stand-in `gpg` named in the user's *global* config) and a signer that fails
refuses the commit; the message lists every changed field, old -> new; `toolwire
undo` of a committed run makes a revert commit, by the rules of the commit it reverts.
After a refused commit the store says the operations were applied, as the notes are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import NOTES, VALID, _spec, _workspace

pytestmark = pytest.mark.local


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env or _git_env(cwd.parent), capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    return out.stdout


def _git_env(home: Path) -> dict[str, str]:
    """The user's environment: a private global config (the user's), no system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return env | {
        "GIT_CONFIG_GLOBAL": str(home / "user.gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def _repo(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """notes/ as a git repository with one commit; the spec; the user's environment."""
    ws = _workspace(tmp_path)
    spec = _spec(tmp_path, [VALID])
    env = _git_env(tmp_path)
    (tmp_path / "user.gitconfig").write_text("[user]\n\tname = U\n\temail = u@example.org\n")
    git(ws, "init", "-q", env=env)
    git(ws, "add", "-A", env=env)
    git(ws, "commit", "-q", "-m", "start", env=env)
    return ws, spec, env


def _hook(ws: Path, name: str, body: str) -> None:
    path = ws / ".git" / "hooks" / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def toolwire(*args: str | Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        env=env | {"PREFECT_API_URL": ""},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run(
    spec: Path, ws: Path, env: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    db = spec.parent / "store.duckdb"
    return toolwire("run", spec, "--workspace", ws, "--db", db, "--no-prefect", *flags,
                    env=env, cwd=spec.parent)  # fmt: skip


def test_a_failing_pre_commit_hook_refuses_the_commit_unless_the_user_opts_out(
    tmp_path: Path,
) -> None:
    ws, spec, env = _repo(tmp_path)
    start = git(ws, "rev-parse", "HEAD", env=env)
    ran_hooks = tmp_path / "hooks-ran"
    _hook(ws, "pre-commit", f"echo pre-commit >> '{ran_hooks}'\necho 'lint: no' >&2\nexit 1")
    refused = _run(spec, ws, env, "--commit")
    assert refused.returncode == 1, refused.stderr
    assert "GIT_COMMIT_REFUSED" in refused.stderr and "hook" in refused.stderr
    assert "lint: no" in refused.stderr and "Traceback" not in refused.stderr
    assert git(ws, "rev-parse", "HEAD", env=env) == start  # no commit behind the hook's back
    assert ran_hooks.read_text() == "pre-commit\n"
    assert (ws / "bread.md").read_text() != NOTES["bread.md"]  # applied, as the error says
    # ...and the store says so: the operations were stored `planned` (issue 47).
    assert _operation_states(spec, env) == {"applied": 2}

    # The explicit opt-out: no hook runs, the commit is made.
    git(ws, "reset", "-q", "--hard", env=env)  # the test puts the notes back
    forced = _run(spec, ws, env, "--commit-no-verify")
    assert forced.returncode == 0, forced.stderr
    assert git(ws, "rev-parse", "HEAD", env=env) != start
    assert ran_hooks.read_text() == "pre-commit\n"  # not run again


def _operation_states(spec: Path, env: dict[str, str]) -> dict[str, int]:
    """The last run's operations by status, as its store holds them."""
    query = (
        "select status, count(*) as n from operations where run_id = "
        "(select run_id from runs order by started_at desc limit 1) group by status"
    )
    db = spec.parent / "store.duckdb"
    ran = toolwire("sql", query, "--db", db, "--format", "json", env=env, cwd=spec.parent)
    assert ran.returncode == 0, ran.stderr
    return {row["status"]: row["n"] for row in json.loads(ran.stdout)}


def test_a_no_verify_commit_is_reverted_without_hooks_or_signing(tmp_path: Path) -> None:
    """The revert of a `--commit-no-verify` run tried to sign and failed (issue 47)."""
    ws, spec, env = _repo(tmp_path)
    with (tmp_path / "user.gitconfig").open("a") as config:
        config.write("[gpg]\n\tprogram = false\n[commit]\n\tgpgsign = true\n")
    _hook(ws, "pre-commit", "echo 'lint: no' >&2\nexit 1")
    forced = _run(spec, ws, env, "--commit-no-verify")
    assert forced.returncode == 0, forced.stderr
    message = git(ws, "log", "-1", "--format=%B", env=env)
    assert "toolwire-no-verify: true" in message
    run_id = message.split("toolwire-run: ", 1)[1].split()[0]
    undone = toolwire("undo", run_id, "--workspace", ws, "--db", tmp_path / "store.duckdb",
                      env=env, cwd=tmp_path)  # fmt: skip
    assert undone.returncode == 0, undone.stderr
    assert "revert commit: " in undone.stderr
    assert git(ws, "log", "-1", "--format=%s", env=env).startswith('Revert "toolwire: ')
    assert git(ws, "status", "--porcelain", env=env) == ""
    assert _operation_states(spec, env) == {"undone": 2}


def test_commit_follows_gpgsign_and_lists_what_changed_and_undo_reverts(tmp_path: Path) -> None:
    ws, spec, env = _repo(tmp_path)
    signer = tmp_path / "fake-gpg"
    signed = tmp_path / "signed"
    # A stand-in for gpg: git asks it for a detached signature and reads its status line.
    signer.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        f"echo signed >> '{signed}'\n"
        "printf '\\n[GNUPG:] SIG_CREATED D 1 8 00 0 0\\n' >&2\n"
        "printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nfake\\n-----END PGP SIGNATURE-----\\n'\n"
    )
    signer.chmod(0o755)
    with (tmp_path / "user.gitconfig").open("a") as config:
        config.write(f"[gpg]\n\tprogram = {signer}\n")
    git(ws, "config", "commit.gpgsign", "true", env=env)
    hooks = tmp_path / "hooks-ran"
    for name in ("pre-commit", "commit-msg", "post-commit"):
        _hook(ws, name, f"echo {name} >> '{hooks}'")

    ran = _run(spec, ws, env, "--commit")
    assert ran.returncode == 0, ran.stderr
    assert signed.read_text() == "signed\n"
    assert "gpgsig " in git(ws, "cat-file", "commit", "HEAD", env=env)
    assert hooks.read_text().split() == ["pre-commit", "commit-msg", "post-commit"]
    message = git(ws, "log", "-1", "--format=%B", env=env)
    assert message.startswith("toolwire: 2 notes changed (run "), message
    assert "- bread.md: topic databases -> cooking" in message, message
    assert "- misc/vacuum.md: title - -> Postgres VACUUM basics" in message, message
    run_id = message.rsplit("toolwire-run: ", 1)[1].strip()
    committed = git(ws, "rev-parse", "HEAD", env=env).strip()

    undone = toolwire("undo", run_id, "--workspace", ws, "--db", tmp_path / "store.duckdb",
                      env=env, cwd=tmp_path)  # fmt: skip
    assert undone.returncode == 0, undone.stderr
    assert "revert commit: " in undone.stderr
    revert = git(ws, "log", "-1", "--format=%B", env=env)
    assert revert.startswith('Revert "toolwire: 2 notes changed') and committed in revert
    assert git(ws, "status", "--porcelain", env=env) == ""  # nothing left uncommitted
    assert (ws / "bread.md").read_text() == NOTES["bread.md"]
    assert git(ws, "diff", "HEAD~2", "HEAD", "--stat", env=env) == ""


def test_a_signer_that_fails_refuses_the_commit_and_says_so(tmp_path: Path) -> None:
    ws, spec, env = _repo(tmp_path)
    with (tmp_path / "user.gitconfig").open("a") as config:
        config.write("[gpg]\n\tprogram = false\n[commit]\n\tgpgsign = true\n")
    start = git(ws, "rev-parse", "HEAD", env=env)
    ran = _run(spec, ws, env, "--commit")
    assert ran.returncode == 1, ran.stderr
    assert "GIT_COMMIT_REFUSED" in ran.stderr and "signing the commit failed" in ran.stderr
    assert git(ws, "rev-parse", "HEAD", env=env) == start
