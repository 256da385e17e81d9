"""CLI flags pushed to extremes: each bad value is one `error: USAGE_ERROR ...` line and
exit 2 before any work starts (safety round four).

Before: `--workspace ""` (an unset shell variable) ran the librarian on the current
directory, `--model ""` silently ran the spec's model, `--user "   "` stored a user id
`profile show` then refused, and `--db`/`--record` naming a folder failed with exit 1
(a store error, an OSError) instead of a usage error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local

TOOLWIRE = Path(sys.executable).parent / "toolwire"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """notes/ (a workspace) and spec.yaml (a replay librarian) in one folder."""
    root = tmp_path_factory.mktemp("flags")
    _workspace(root)
    _spec(root, [VALID])
    return root


def _toolwire(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWIRE), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "TOOLWIRE_DB": str(cwd / "env.duckdb"), **(env or {})},
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


RUN = ("run", "spec.yaml", "--workspace", "notes", "--db", "s.duckdb", "--no-prefect")
# (arguments, a fragment of the one error line)
CASES: list[tuple[tuple[str, ...], str]] = [
    (("run", "spec.yaml", "--workspace", "", "--no-prefect"), "--workspace: empty value"),
    (("run", "spec.yaml", "--workspace=", "--no-prefect"), "--workspace: empty value"),
    ((*RUN, "--model", ""), "--model: empty value"),
    ((*RUN, "--tooling-transport", ""), "--tooling-transport: empty value"),
    ((*RUN, "--db", ""), "--db: empty value"),
    ((*RUN, "--record", ""), "--record: empty value"),
    ((*RUN, "--user", ""), "--user: empty value"),
    ((*RUN, "--user", "   "), "--user: a user id is not empty or blank"),
    ((*RUN, "--user", "a\nb"), "--user: a user id is one line without control characters"),
    ((*RUN, "--user", "u" * 201), "--user: a user id has at most 200 characters"),
    ((*RUN, "--db", "."), "--db: . is a folder, not a store file"),
    ((*RUN, "--record", "notes"), "--record: notes is a folder, not a file"),
    (("render", "spec.yaml", "--workspace", ""), "--workspace: empty value"),
    (("review", "--list", "--user", " "), "--user: a user id is not empty or blank"),
    (("sql", ""), "an empty argument"),
    (("undo", "abc", "--workspace", ""), "--workspace: empty value"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[repr(c[0][-2:]) for c in CASES])
def test_a_bad_flag_is_one_usage_error_before_any_work(
    place: Path, args: tuple[str, ...], fragment: str
) -> None:
    before = _snapshot(place)
    ran = _toolwire(place, *args)
    assert ran.returncode == 2, (ran.returncode, ran.stderr[-2000:])
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: USAGE_ERROR: "), ran.stderr
    assert fragment in lines[0], lines[0]
    assert _snapshot(place) == before  # no note written, no store created, no report


def test_an_empty_workspace_never_means_the_current_directory(place: Path) -> None:
    """Not a dry run: before, the notes of the current directory were rewritten."""
    notes = place / "notes"
    before = _snapshot(notes)
    ran = _toolwire(notes, "run", "../spec.yaml", "--workspace", "", "--db", "../s.duckdb",
                    "--no-prefect")  # fmt: skip
    assert ran.returncode == 2 and "--workspace: empty value" in ran.stderr, ran.stderr
    assert _snapshot(notes) == before


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("TOOLWIRE_USER", "   ", "TOOLWIRE_USER: a user id is not empty or blank"),
        ("TOOLWIRE_DB_LOCK_TIMEOUT_S", "inf", "TOOLWIRE_DB_LOCK_TIMEOUT_S: Input should be less"),
        ("TOOLWIRE_OPENAI_BASE_URL", "notaurl", "TOOLWIRE_OPENAI_BASE_URL: expected an http://"),
    ],
)
def test_a_bad_setting_stops_the_run_before_it_starts(
    place: Path, name: str, value: str, fragment: str
) -> None:
    before = _snapshot(place)
    ran = _toolwire(place, *RUN, "--dry-run", env={name: value})
    assert ran.returncode == 2 and fragment in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr and _snapshot(place) == before


# Numbers out of range: refused by the option itself (exit 2), before any store is read.
# Before: `runs -n 10**24` and `report --limit -5` were DuckDB errors (exit 1), `report
# --limit 0` wrote an empty page, `sql --timeout inf` printed an OverflowError traceback.
RANGES: list[tuple[tuple[str, ...], str]] = [
    (("runs", "-n", "1000000000000000000000000"), "less than or equal to 1000000"),
    (("runs", "-n", "0"), "greater than or equal to 1"),
    (("report", "--html", "r.html", "--limit", "-5"), "greater than or equal to 1"),
    (("report", "--html", "r.html", "--limit", "0"), "greater than or equal to 1"),
    (("report", "--html", "r.html", "--limit", "10" * 12), "less than or equal to 1000000"),
    (("sql", "select 1", "--timeout", "inf"), "less than or equal to 86400"),
    (("sql", "select 1", "--timeout", "1e308"), "less than or equal to 86400"),
    (("serve", "spec.yaml", "--limit", "0"), "greater than or equal to 1"),
    (("batch", "spec.yaml", "-w", "notes", "--max-workers", "1" + "0" * 20), "less than or"),
]


@pytest.mark.parametrize(("args", "fragment"), RANGES, ids=[" ".join(c[0]) for c in RANGES])
def test_a_number_out_of_range_is_refused_by_its_option(
    place: Path, args: tuple[str, ...], fragment: str
) -> None:
    before = _snapshot(place)
    ran = _toolwire(place, *args)
    assert ran.returncode == 2, (ran.returncode, ran.stderr[-2000:])
    assert fragment in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert _snapshot(place) == before


def test_a_batch_list_with_no_name_is_refused(place: Path) -> None:
    """`--models ,` silently ran the spec's model."""
    ran = _toolwire(place, "batch", "spec.yaml", "-w", "notes", "--models", ",", "--dry-run")
    assert ran.returncode == 2, ran.stderr
    assert "error: USAGE_ERROR: --models ',': no name in it" in ran.stderr


def test_parse_refuses_an_answer_of_more_than_16_mib(place: Path) -> None:
    """`parse /dev/zero` read until the kernel killed it (23 GB); an answer is kilobytes."""
    ran = subprocess.run(
        [str(TOOLWIRE), "parse", "-"],
        input=b"x" * (16 * 1024 * 1024 + 1),
        capture_output=True,
        timeout=600,
        cwd=place,
    )
    stderr = ran.stderr.decode()
    assert ran.returncode == 2 and "error: USAGE_ERROR: -: more than 16 MiB" in stderr, stderr


@pytest.fixture(scope="module")
def replay_targets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A FIFO (reading it hung the run), a sparse file over 64 MiB, a folder; kept out of
    `place`, whose files the other tests read."""
    targets = tmp_path_factory.mktemp("replay-targets")
    os.mkfifo(targets / "fifo")
    with (targets / "big.jsonl").open("wb") as handle:
        handle.truncate(64 * 1024 * 1024 + 1)  # sparse: no disk used
    (targets / "folder").mkdir()
    with (targets / "huge.json").open("wb") as handle:
        handle.truncate(16 * 1024 * 1024 + 1)  # zeros, as /dev/zero gives
    return {name: targets / name for name in ("fifo", "big.jsonl", "folder", "huge.json")}


@pytest.mark.parametrize(
    ("flag", "target"),
    [("--db", "fifo"), ("--db", "/dev/null"), ("--record", "fifo"), ("--record", "/dev/full")],
)
def test_a_store_or_recording_that_is_no_regular_file_is_refused(
    place: Path, replay_targets: dict[str, Path], flag: str, target: str
) -> None:
    """`--db FIFO` hung the run before it started; `--record /dev/full` lost the recording
    and the run said ok."""
    path = replay_targets.get(target, Path(target))
    ran = _toolwire(place, *RUN, "--dry-run", flag, str(path))
    assert ran.returncode == 2, ran.stderr
    assert f"error: USAGE_ERROR: {flag}: {path} is not a regular file" in ran.stderr


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("fifo", "is not a regular file"), ("big.jsonl", "is larger than 64 MiB"),
     ("folder", "is not a regular file")],
)  # fmt: skip
def test_a_replay_script_that_is_no_file_is_refused_before_the_run(
    place: Path, replay_targets: dict[str, Path], name: str, fragment: str
) -> None:
    """`replay:/dev/zero` read until memory ran out; a FIFO hung the run."""
    target = replay_targets[name]
    flag = _toolwire(place, *RUN, "--dry-run", "--model", f"replay:{target}")
    assert flag.returncode == 2, flag.stderr
    assert f"error: USAGE_ERROR: --model 'replay:{target}': replay script" in flag.stderr
    assert fragment in flag.stderr
    env = _toolwire(place, *RUN, "--dry-run", env={"TOOLWIRE_MODEL": f"replay:{target}"})
    assert env.returncode == 2 and "TOOLWIRE_MODEL" in env.stderr and fragment in env.stderr
    spec = place / f"spec-{name}.yaml"
    spec.write_text((place / "spec.yaml").read_text().replace("replay:script.jsonl",
                                                              f"replay:{target}"))  # fmt: skip
    ran = _toolwire(place, "run", spec.name, "--workspace", "notes", "--db", "s.duckdb",
                    "--dry-run", "--no-prefect")  # fmt: skip
    assert ran.returncode == 2 and f"model.name: replay script {target}" in ran.stderr
    checked = _toolwire(place, "spec", "check", spec.name)
    assert checked.returncode == 1 and fragment in checked.stdout + checked.stderr


def test_a_huge_spec_or_answers_file_is_refused_before_it_is_read_whole(
    place: Path, replay_targets: dict[str, Path]
) -> None:
    """`spec check /dev/zero` and `review --answers /dev/zero` read until memory ran out."""
    huge = replay_targets["huge.json"]
    checked = _toolwire(place, "spec", "check", str(huge))
    assert checked.returncode == 1, checked.stderr
    assert f"{huge}: larger than 8 MiB: not a spec" in checked.stdout + checked.stderr
    ran = _toolwire(place, "run", str(huge), "--no-prefect")
    assert ran.returncode == 2 and "larger than 8 MiB: not a spec" in ran.stderr, ran.stderr
    store = place / "answers.duckdb"  # a store with a librarian run to answer
    first = _toolwire(place, *RUN[:-3], "--db", store.name, "--dry-run", "--no-prefect")
    assert first.returncode == 0, first.stderr
    answered = _toolwire(place, "review", "--db", store.name, "--workspace", "notes",
                         "--answers", str(huge))  # fmt: skip
    assert answered.returncode == 2, answered.stderr
    assert f"error: USAGE_ERROR: --answers {huge}: larger than 16 MiB" in answered.stderr


def test_spec_check_warns_when_the_answer_alone_fills_the_window(place: Path) -> None:
    """Each value valid alone; together an agent's tool outputs were all dropped and its
    run still ended ok."""
    spec = place / "spec-window.yaml"
    spec.write_text((place / "spec.yaml").read_text().replace(
        "constraints:\n", "constraints:\n  context_window_tokens: 512\n"))  # fmt: skip
    checked = _toolwire(place, "spec", "check", spec.name)
    assert checked.returncode == 0, checked.stderr
    assert (
        f"warning: {spec.name}: model.max_tokens 512 is not below "
        "constraints.context_window_tokens 512: the answer alone fills the window"
    ) in checked.stderr
    fine = _toolwire(place, "spec", "check", "spec.yaml")
    assert fine.returncode == 0 and "warning" not in fine.stderr, fine.stderr


@pytest.mark.parametrize(
    "args",
    [("profile", "show", "bob"), ("profile", "reset", "bob"), ("store", "merge", "x.duckdb"),
     ("runs",), ("sql", "select 1")],
)  # fmt: skip
def test_a_store_that_is_a_fifo_is_refused_by_every_command(
    place: Path, replay_targets: dict[str, Path], args: tuple[str, ...]
) -> None:
    """`profile show|reset` and `store merge` hung on `--db FIFO` (DuckDB waited on it)."""
    fifo = replay_targets["fifo"]
    flag = _toolwire(place, *args, "--db", str(fifo))
    assert flag.returncode == 2, flag.stderr
    assert f"error: USAGE_ERROR: --db: {fifo} is not a regular file" in flag.stderr
    env = _toolwire(place, *args, env={"TOOLWIRE_DB": str(fifo)})
    assert env.returncode == 2, env.stderr
    assert f"TOOLWIRE_DB: {fifo} is not a regular file, not a store file" in env.stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(("--dask-address", "tcp://127.0.0.1:9"), "--dask-address applies to --task-runner dask"),
     (("--batch-id", "a\nb"), "--batch-id: one non-blank line of at most 200 characters"),
     (("--batch-id", "   "), "--batch-id: one non-blank line")],
)  # fmt: skip
def test_a_batch_flag_that_was_ignored_or_stored_as_given_is_refused(
    place: Path, flags: tuple[str, ...], fragment: str
) -> None:
    """`--dask-address` without dask was silently ignored; a newline went into the store."""
    ran = _toolwire(place, "batch", "spec.yaml", "-w", "notes", "--dry-run", *flags)
    assert ran.returncode == 2 and f"error: USAGE_ERROR: {fragment}" in ran.stderr, ran.stderr


def test_spec_check_names_model_fields_its_provider_never_reads(place: Path) -> None:
    """`base_url`, `extra_body` on an in-process llamacpp: model were silently ignored."""
    spec = place / "spec-unread.yaml"
    spec.write_text((place / "spec.yaml").read_text().replace(
        "model: replay:script.jsonl",
        "model: {name: 'llamacpp:smollm2-135m', base_url: 'http://127.0.0.1:8080/v1', "
        "extra_body: {top_k: 5}}"))  # fmt: skip
    checked = _toolwire(place, "spec", "check", "--schema-only", spec.name)
    assert checked.returncode == 0, checked.stderr
    note = f"note: {spec.name}: model.base_url, model.extra_body are not read by a llamacpp: model"
    assert note in checked.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(("run", "spec.yaml", "--workspace", "notes", "--db", "s.duckdb", "--dry-run", "--prefect"),
      "error: PREFECT_UNAVAILABLE: Failed to reach API at http://127.0.0.1:9/api/"),
     (("batch", "spec.yaml", "-w", "notes", "--db", "s.duckdb", "--dry-run"),
      "error: PREFECT_UNAVAILABLE: Failed to reach API at http://127.0.0.1:9/api/"),
     (("serve", "scheduled.yaml"),
      "error: USAGE_ERROR: no Prefect server answers at PREFECT_API_URL=http://127.0.0.1:9/api")],
    ids=["run", "batch", "serve"],
)  # fmt: skip
def test_an_unreachable_prefect_api_is_one_line(
    place: Path, args: tuple[str, ...], fragment: str
) -> None:
    """`run`, `batch` and `serve` printed Prefect's or httpx's traceback."""
    scheduled = place / "scheduled.yaml"
    scheduled.write_text((place / "spec.yaml").read_text()
                         + 'schedule: {cron: "0 6 * * *", workspace: notes}\n')  # fmt: skip
    ran = _toolwire(place, *args, env={"PREFECT_API_URL": "http://127.0.0.1:9/api"})
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert ran.returncode in (1, 2) and fragment in ran.stderr, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, ran.stderr


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [(("run", "spec.yaml", "--workspace", "notes", "--no-prefect", "--tooling-transport", "xml"),
      {}, "--tooling-transport 'xml': spec.yaml is a librarian spec (transport xml_attrless); "
      "it runs over xml_attrless only"),
     (("run", "AGENT", "--workspace", "notes", "--no-prefect"), {"TOOLWIRE_TRANSPORT":
      "xml_attrless"}, "TOOLWIRE_TRANSPORT 'xml_attrless': AGENT is a tool-agent spec"),
     (("render", "AGENT", "--workspace", "notes"), {"TOOLWIRE_TRANSPORT": "xml_attrless"},
      "TOOLWIRE_TRANSPORT 'xml_attrless': AGENT is a tool-agent spec (transport xml)"),
     (("batch", "AGENT", "-w", "notes", "--transports", "xml,xml_attrless"), {},
      "--transports 'xml_attrless': AGENT is a tool-agent spec")],
    ids=["librarian-as-agent", "agent-as-librarian", "render", "batch"],
)  # fmt: skip
def test_a_transport_override_keeps_the_spec_s_job(
    place: Path, args: tuple[str, ...], env: dict[str, str], fragment: str
) -> None:
    """A tool-agent spec run over xml_attrless started a run that ended INTERNAL_ERROR
    (KeyError: 'propose'); in a batch, a Failed run."""
    agent = str(REPO / "specs" / "agent-xml.yaml")
    ran = _toolwire(
        place,
        *(agent if a == "AGENT" else a for a in args),
        env={"TOOLWIRE_DB": str(place / "job.duckdb"), **env},
    )
    assert ran.returncode == 2, ran.stderr
    assert "error: USAGE_ERROR: " + fragment.replace("AGENT", agent) in ran.stderr
    assert not (place / "job.duckdb").exists()  # no run started


@pytest.mark.parametrize(
    ("parameters", "fragments"),
    [("{transport: xct}", ("schedule.parameters.transport: a librarian spec (transport "
                           "xml_attrless) cannot run over 'xct'",)),
     ("{commit: true}", ("schedule.parameters.commit: cannot commit: ",
                         "is not in a git repository"))],
    ids=["switches the job", "cannot commit"],
)  # fmt: skip
def test_spec_check_refuses_a_schedule_it_could_not_run(
    place: Path, parameters: str, fragments: tuple[str, ...]
) -> None:
    spec = place / "spec-scheduled.yaml"
    schedule = f'schedule: {{cron: "0 6 * * *", workspace: notes, parameters: {parameters}}}\n'
    spec.write_text((place / "spec.yaml").read_text() + schedule)
    checked = _toolwire(place, "spec", "check", spec.name)
    assert checked.returncode == 1
    for fragment in fragments:
        assert fragment in checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [(("--commit",), "--commit: {notes} is not in a git repository; nothing would be committed"),
     (("--commit-no-verify",), "--commit: {notes} is not in a git repository"),
     (("--commit", "--dry-run"), "--commit with --dry-run: a dry run writes nothing to commit")],
)  # fmt: skip
def test_commit_that_cannot_commit_is_refused_before_the_run(
    place: Path, flags: tuple[str, ...], fragment: str
) -> None:
    """Outside a git repository the notes were applied, nothing committed, nothing said."""
    notes = place / "notes"
    before = _snapshot(notes)
    ran = _toolwire(place, *RUN, *flags)
    assert ran.returncode == 2, ran.stderr
    assert "error: USAGE_ERROR: " + fragment.format(notes=notes.resolve()) in ran.stderr
    assert _snapshot(notes) == before
