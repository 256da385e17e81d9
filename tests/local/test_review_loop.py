"""`toolwire review` end to end: real processes, a real store, the bundled e5 scorer.

A librarian run (replayed: the scorer decides, the script only closes the envelope)
asks about the notes it deferred or thinks misfiled; the answers go through the CLI's
non-interactive form, are kept in the store, applied through the journal as runs of
their own, undone by `toolwire undo`, and change what the next run sees and asks.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.journal.write_ahead import CRASH_ENV
from toolwire.librarian.notes.workspace import parse_note, sha256_hex
from toolwire.store import Store
from toolwire.store.review import QuestionRow, record_questions

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
TOPICS = ("databases", "networking", "security", "travel")
TOOLWIRE = Path(sys.executable).parent / "toolwire"  # the console script users run

NOTES = {
    "db/postgres-vacuum.md": "---\ntitle: Postgres VACUUM\ntags: [databases]\n---\n"
    "VACUUM reclaims space held by dead tuples; autovacuum thresholds decide when it runs.\n"
    "Tune autovacuum_vacuum_scale_factor on large tables and watch bloat with pgstattuple.\n",
    "db/sqlite-indexes.md": "---\ntitle: SQLite indexes\ntags: [databases]\n---\n"
    "A covering index answers a query from the index alone. EXPLAIN QUERY PLAN shows\n"
    "whether SQLite uses it; composite indexes serve the leftmost columns first.\n",
    "net/dns-debugging.md": "---\ntitle: DNS debugging\ntags: [networking]\n---\n"
    "dig +trace follows a name from the root servers down. Check the resolver in\n"
    "/etc/resolv.conf and compare answers from 1.1.1.1 and the local resolver.\n",
    "net/wireguard.md": "---\ntitle: WireGuard tunnel\ntags: [networking]\n---\n"
    "Each peer has a key pair; AllowedIPs routes traffic into the tunnel. Check the\n"
    "handshake with `wg show` and open UDP 51820 on the firewall.\n",
    # Under a folder the default globs skip (Daily/): this spec reads it as a note.
    "Daily/standup.md": "Standup: the VPN tunnel to the office drops every hour;\n"
    "check the WireGuard keepalive and the route to 10.0.0.0/8.\n",
    "ssh-keys.md": "---\ntitle: SSH keys\ntags: [security]\n---\n"
    "Use ed25519 keys, protect them with a passphrase, and disable password login in\n"
    "sshd_config. Rotate keys when someone leaves the team.\n",
    # Nothing in these two is any topic: the scorer defers them (questions).
    "00-inbox/scratch.md": "Things to sort out this week.\n\n"
    "- ask Ana about the budget for the offsite\n"
    "- the printer on floor 2 is out of toner again\n"
    "- lunch order for Friday: pizza or sushi\n",
    "00-inbox/chores.md": "Buy milk and eggs. Call the plumber about the kitchen sink.\n"
    "Renew the gym membership before the end of the month.\n",
    # About travel, untagged: with min_confidence 1.0 a question too.
    "00-inbox/lisbon.md": "Lisbon long weekend: the train from Porto, a hotel near Alfama,\n"
    "pack light, visit the Belem tower and take tram 28 to the castle.\n",
    "inbox/query-plans.md": "Notes on reading query plans: sequential scans versus index "
    "scans, join order,\nand why the planner misjudges row counts when statistics are "
    "stale. Run ANALYZE.\n",
}
# Which notes the scorer asks about besides these two is the scorer's business (bench and
# judge tests); these tests need only two questions that no scorer can answer itself.
CHORES, LISBON, SCRATCH = "00-inbox/chores.md", "00-inbox/lisbon.md", "00-inbox/scratch.md"

# The scorer plans every operation; the replayed model only closes the envelope.
EMPTY_ANSWER = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>-</summary>\n<operations>\n</operations>\n<warnings></warnings>\n"
    "</librarian_response>"
)


def _write_vault(tmp: Path) -> Path:
    root = tmp / "vault"
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _write_spec(tmp: Path) -> Path:
    script = tmp / "script.jsonl"
    script.write_text(json.dumps({"text": EMPTY_ANSWER, "finish_reason": "stop"}) + "\n")
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: review-test
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, networking, security, travel]
  descriptions:
    databases: storing and querying data; SQL, indexes, query tuning
    networking: how machines talk; DNS, TCP, VPNs, routing
    security: keeping systems safe; TLS, certificates, SSH, secrets
    travel: trips, itineraries, transport, packing and places to visit
judgement:
  decide: scorer
  embedder: e5-small
  write_titles: false
constraints:
  batch_size: 50
  max_operations: 50
  min_confidence: 1.0      # every untagged note is a question, whatever the scorer thinks
  allowed_kinds: [retag_note, defer]
  context_window_tokens: 4000
notes:
  exclude: [".obsidian/"]
memory:
  synthesis: "off"
""",
        encoding="utf-8",
    )
    return spec


def toolwire(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLWIRE_USER": "ana"}
    return subprocess.run(
        [str(TOOLWIRE), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )


def _questions(db: Path, *extra: str | Path) -> dict:
    listed = toolwire("review", "--db", db, "--list", "--format", "json", *extra)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def _one_line_error(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def asked(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(vault, store, spec) after one librarian run, as a process, that asked questions."""
    vault, spec, db = _write_vault(tmp_path), _write_spec(tmp_path), tmp_path / "s.duckdb"
    ran = toolwire("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    return vault, db, spec


def test_the_review_loop_as_processes_answers_undoes_and_keeps_every_answer(
    asked: tuple[Path, Path, Path],
) -> None:
    vault, db, _ = asked
    listed = _questions(db, "--workspace", vault)
    by_path = {q["path"]: q for q in listed["questions"]}
    for path in (CHORES, SCRATCH):
        assert by_path[path]["kind"] == "deferred" and by_path[path]["state"] == "open"
        assert by_path[path]["current_topic"] is None
        best = by_path[path]["candidates"][0]
        assert best["topic"] in listed["topics"] and best["topic"] in best["evidence"]
        assert 0.0 <= best["confidence"] < 1.0
    assert listed["topics"] == ["databases", "networking", "security", "travel"]
    chores_before = (vault / CHORES).read_bytes()

    answered = toolwire(
        "review", "--db", db, "--workspace", vault, "-a", f"{SCRATCH}=travel", "-a", f"{CHORES}=-"
    )
    assert answered.returncode == 0, answered.stderr
    note, _ = parse_note(SCRATCH, (vault / SCRATCH).read_bytes())
    # As a retag writes it in this vault: a tag, no topic property (the vault has none).
    assert note.topic is None and note.tags == ("travel",)
    assert (vault / SCRATCH).read_text(encoding="utf-8").endswith(NOTES[SCRATCH])
    assert (vault / CHORES).read_bytes() == chores_before  # "leave it" writes nothing

    store = Store(db, create=False)
    _, answers = store.query(
        "SELECT note_path, answer, topic, user_id, source, applied_run_id, answered_at "
        "FROM review_answers ORDER BY note_path"
    )
    assert [a[:5] for a in answers] == [
        (CHORES, "not_a_topic", None, "ana", "cli"),
        (SCRATCH, "topic", "travel", "ana", "cli"),
    ]
    review_run, answered_at = answers[1][5], answers[1][6]
    assert answered_at is not None and answers[0][5] is None
    _, runs = store.query("SELECT job, status, workspace FROM runs WHERE run_id = ?", [review_run])
    assert runs == [("review", "ok", str(vault.resolve()))]
    _, changes = store.query(
        "SELECT path, field, old_value, new_value FROM note_changes WHERE run_id = ?",
        [review_run],
    )
    assert (SCRATCH, "topic", "", "travel") in changes
    shown = toolwire("show", review_run[:12], "--db", db, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert [o["status"] for o in json.loads(shown.stdout)["operations"]] == ["applied"]
    states = {q["path"]: q["state"] for q in _questions(db)["questions"]}
    assert states[SCRATCH] == states[CHORES] == "answered"

    undone = toolwire("undo", review_run, "--workspace", vault, "--db", db)
    assert undone.returncode == 0, undone.stderr
    assert (vault / SCRATCH).read_text(encoding="utf-8") == NOTES[SCRATCH]
    states = {q["path"]: q["state"] for q in _questions(db)["questions"]}
    assert (states[SCRATCH], states[CHORES]) == ("open", "answered")  # undone: asked again
    _, kept = store.query("SELECT count(*) FROM review_answers")
    assert kept == [(2,)]  # an undo never deletes what the user said

    # The review reads the vault with the question run's globs, Daily/ included.
    assert (
        "Daily/standup.md: topic networking"
        in toolwire("review", "--db", db, "-a", "Daily/standup.md=networking").stdout
    )


def test_an_answer_changes_the_next_run(asked: tuple[Path, Path, Path]) -> None:
    vault, db, spec = asked
    lisbon = LISBON.removesuffix(".md")

    def judged() -> tuple[str, dict]:
        ctx = prepare_run(spec, workspace=vault, db=db)
        result = run_librarian(ctx)
        assert result.ok, result.error_message
        return result.run_id, ctx.judgements

    def travel_examples(judgements: dict) -> dict[str, int]:
        return {
            note: next(c for c in j.candidates if c.topic == "travel").examples
            for note, j in judgements.items()
        }

    _, before = judged()
    assert before[lisbon].decision == "defer" and before[lisbon].current is None

    answered = toolwire("review", "--db", db, "-a", f"{LISBON}=travel", "-a", f"{CHORES}=-")
    assert answered.returncode == 0, answered.stderr

    run_id, after = judged()
    assert after[lisbon].current == "travel" and after[lisbon].decision == "keep"
    # The answer is an example of its topic for every other note (never for itself). How
    # much a tagged example weighs against this run's guesses is the scorer's business.
    gained = travel_examples(after)
    assert gained.pop(lisbon) == 0
    assert min(gained.values()) >= 1, gained
    # Neither note is asked about again: one is tagged, the other was left as it is.
    listed = _questions(db, "--workspace", vault)
    assert listed["run_id"] == run_id
    assert not {LISBON, CHORES} & {q["path"] for q in listed["questions"]}

    # "Leave it" holds only for the bytes it was given for: an edited note is asked again.
    with (vault / CHORES).open("a", encoding="utf-8") as handle:
        handle.write("Book a table for Saturday.\n")
    judged()
    asked_now = {q["path"] for q in _questions(db)["questions"]}
    assert CHORES in asked_now and LISBON not in asked_now


def test_review_refuses_in_one_line_and_writes_nothing(
    asked: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    vault, db, _ = asked
    before = {rel: (vault / rel).read_bytes() for rel in NOTES}
    store = Store(db, create=False)

    unknown = toolwire("review", "--db", db, "-a", f"{SCRATCH}=travell")
    _one_line_error(unknown, 2, "unknown topic 'travell'; topics: databases, networking")
    not_asked = toolwire("review", "--db", db, "-a", "db/sqlite-indexes.md=databases")
    _one_line_error(not_asked, 2, "no question about 'db/sqlite-indexes.md'")
    run_id = _questions(db)["run_id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mismatch = toolwire("review", "--db", db, "--run", run_id, "--workspace", elsewhere, "--list")
    _one_line_error(mismatch, 2, f"was on workspace {vault.resolve()}, not")
    no_tty = subprocess.run(
        [str(TOOLWIRE), "review", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    _one_line_error(no_tty, 2, "no terminal to ask on")

    # A note edited since the question: refused before anything is stored or written.
    edited = NOTES[SCRATCH] + "- and book the train to Porto\n"
    (vault / SCRATCH).write_text(edited, encoding="utf-8")
    changed = toolwire("review", "--db", db, "-a", f"{CHORES}=security", "-a", f"{SCRATCH}=travel")
    _one_line_error(changed, 2, f"{SCRATCH} changed since run")
    assert (vault / SCRATCH).read_text(encoding="utf-8") == edited
    assert (vault / CHORES).read_bytes() == before[CHORES]  # all or nothing: it was fine
    _, answers = store.query("SELECT count(*) FROM review_answers")
    assert answers == [(0,)]
    assert {r: (vault / r).read_bytes() for r in NOTES if r != SCRATCH} == {
        r: b for r, b in before.items() if r != SCRATCH
    }

    # A note deleted since the question: listed as missing, refused in one line.
    (vault / LISBON).unlink()
    states = {q["path"]: q["state"] for q in _questions(db)["questions"]}
    assert (states[LISBON], states[SCRATCH], states[CHORES]) == ("missing", "changed", "open")
    gone = toolwire("review", "--db", db, "-a", f"{LISBON}=travel")
    _one_line_error(gone, 2, f"{LISBON} is gone since run")


def test_an_answer_whose_apply_is_refused_is_kept(asked: tuple[Path, Path, Path]) -> None:
    vault, db, _ = asked
    before = (vault / CHORES).read_bytes()
    lock = vault / ".toolwire" / "lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("a") as handle:  # another toolwire process is changing the workspace
        fcntl.flock(handle, fcntl.LOCK_EX)
        refused = toolwire("review", "--db", db, "-a", f"{CHORES}=security")
    _one_line_error(refused, 1, "another toolwire process is changing")
    assert (vault / CHORES).read_bytes() == before
    store = Store(db, create=False)
    _, rows = store.query(
        "SELECT a.topic, a.content_sha256, r.status, r.job FROM review_answers a "
        "JOIN runs r ON r.run_id = a.applied_run_id"
    )
    assert rows == [("security", sha256_hex(before), "Failed", "review")]
    # The question is still open: answering again (the lock gone) applies it.
    assert {q["path"]: q["state"] for q in _questions(db)["questions"]}[CHORES] == "open"
    again = toolwire("review", "--db", db, "-a", f"{CHORES}=security")
    assert again.returncode == 0, again.stderr
    assert parse_note(CHORES, (vault / CHORES).read_bytes())[0].topic_among(TOPICS) == "security"


def test_the_prompt_on_a_terminal_walks_the_questions(asked: tuple[Path, Path, Path]) -> None:
    """The interactive form, in a real process on a pseudo-terminal: a typo is refused and
    asked again, a topic name is applied, ``q`` stops with the rest left open."""
    vault, db, _ = asked
    # The prompt asks in the tool's order (the one that teaches most, issue 41): the
    # first two open questions of --list.
    first, second = [q["path"] for q in _questions(db)["questions"] if q["state"] == "open"][:2]
    second_before = (vault / second).read_bytes()
    master, slave = pty.openpty()
    env = {**os.environ, "TOOLWIRE_USER": "ana", "COLUMNS": "120", "TERM": "dumb"}
    proc = subprocess.Popen(
        [str(TOOLWIRE), "review", "--db", str(db), "--workspace", str(vault)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    os.write(master, b"travell\ntravel\nq\n")  # queued by the terminal, read line by line
    shown = b""
    while True:  # drain the terminal so the process never blocks writing to it
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    assert proc.wait(timeout=300) == 0, shown.decode(errors="replace")
    os.close(master)
    text = shown.decode("utf-8", errors="replace")
    first_line = NOTES[first].splitlines()[0][:40]
    assert "1/" in text and first in text and first_line in text
    assert "expected to decide" in text or "an answer decides this note" in text
    assert "unknown topic 'travell'" in text
    assert "topic travel (run" in text and "1 answer(s) applied" in text
    assert parse_note(first, (vault / first).read_bytes())[0].topic_among(TOPICS) == "travel"
    assert (vault / second).read_bytes() == second_before  # quit at its question
    _, rows = Store(db, create=False).query("SELECT note_path, source FROM review_answers")
    assert rows == [(first, "prompt")]
    assert {q["path"]: q["state"] for q in _questions(db)["questions"]}[second] == "open"


def test_a_misfiled_note_answered_keeps_its_other_tags_and_comments(
    asked: tuple[Path, Path, Path],
) -> None:
    """Which notes look misfiled is the scorer's call (judge.py, unit-tested); here the
    store holds such a question directly, and the answer goes through the CLI."""
    vault, db, _ = asked
    rel = "db/sqlite-indexes.md"
    text = (
        "---\ntitle: SQLite indexes\n# filed in a hurry\ntags: [databases, howto]\n---\n"
        "Renew TLS certificates with certbot before they expire.\n"
    )
    (vault / rel).write_text(text, encoding="utf-8")
    run_id = _questions(db)["run_id"]
    question = QuestionRow(
        note_path=rel,
        note_id="db/sqlite-indexes",
        content_sha256=sha256_hex(text.encode()),
        kind="misfiled",
        current_topic="databases",
        candidates=({"topic": "security", "confidence": 0.9, "evidence": "security 0.90"},
                    {"topic": "databases", "confidence": 0.02, "evidence": "databases 0.02"}),
        why="databases looks misfiled",
    )  # fmt: skip
    store = Store(db, create=False)
    record_questions(store, run_id, str(vault.resolve()), [question])
    listed = {q["path"]: q for q in _questions(db)["questions"]}
    assert listed[rel]["kind"] == "misfiled" and listed[rel]["state"] == "open"

    answered = toolwire("review", "--db", db, "-a", f"{rel}=security")
    assert answered.returncode == 0, answered.stderr
    after = (vault / rel).read_text(encoding="utf-8")
    note, _ = parse_note(rel, after.encode())
    assert "security" in note.tags and "howto" in note.tags and "databases" not in note.tags
    assert "# filed in a hurry\n" in after and after.endswith("before they expire.\n")
    assert {q["path"]: q["state"] for q in _questions(db)["questions"]}[rel] == "answered"


def test_a_review_killed_mid_apply_loses_nothing(asked: tuple[Path, Path, Path]) -> None:
    """SIGKILL right after the note is written: the answer is in the store, the next
    librarian run finishes the journal and settles the review run, nothing is asked twice."""
    vault, db, spec = asked
    env = {**os.environ, "TOOLWIRE_USER": "ana", CRASH_ENV: "1"}
    killed = subprocess.run(
        [str(TOOLWIRE), "review", "--db", str(db), "-a", f"{LISBON}=travel"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = Store(db, create=False)
    _, rows = store.query(
        "SELECT r.run_id, r.status FROM review_answers a JOIN runs r ON r.run_id = a.applied_run_id"
    )
    assert [status for _, status in rows] == ["running"]
    review_run = rows[0][0]

    ran = toolwire("run", spec, "--workspace", vault, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr
    _, settled = store.query("SELECT status, error_code FROM runs WHERE run_id = ?", [review_run])
    assert settled == [("Failed", "RUN_INTERRUPTED")]
    assert parse_note(LISBON, (vault / LISBON).read_bytes())[0].topic_among(TOPICS) == "travel"
    assert LISBON not in {q["path"] for q in _questions(db)["questions"]}
