"""Profiles in a real store: versions, reset, undo-derived context, after_run, CLI, tokenizer.

The last test runs the librarian twice for one user. It needs the two lines
that wire memory into ``toolwire.librarian.job`` (USER CONTEXT into the
request, ``after_run`` after ``finish_run``). Replay scripts for a run with
synthesis hold, in order: the librarian's completions (with any repairs), the
insights JSON, and on every third run of a user the consolidation JSON.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwire.domain import Operation, OperationOutcome
from toolwire.errors import StoreError
from toolwire.memory import (
    load_profile,
    profile_prompt_context,
    record_undo,
    reset_profile,
    save_profile,
)
from toolwire.memory.profiles import latest_profile, profile_history
from toolwire.memory.state import UserProfile
from toolwire.memory.synthesis import after_run, interaction_from_run
from toolwire.memory.tokens import estimate_tokens, token_counter, truncate_to_tokens
from toolwire.providers.replay import ReplayProvider
from toolwire.store import Store

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store.duckdb")


def _profile(user: str = "ann", **insights: object) -> UserProfile:
    profile = UserProfile(user)
    profile.update_from_interaction(insights)
    return profile


def _run(
    store: Store,
    run_id: str,
    user: str,
    *,
    ops: tuple[tuple[str, ...], ...] = (("retag_note", "bread", "Sourdough starter"),),
    status: str = "ok",
    error_code: str | None = None,
    started: int = 0,
) -> None:
    """A hand-built finished librarian run with applied operations (kind, target, title[, body])."""
    store.start_run(
        {
            "run_id": run_id,
            "user_id": user,
            "spec_name": "librarian-test",
            "job": "librarian",
            "started_at": datetime(2025, 1, 1, 12, 0, started),
        }
    )
    outcomes = [
        OperationOutcome(
            turn=0,
            seq=i,
            operation=Operation(
                f"op_{i}", op[0], op[1], None, op[2], op[3] if len(op) > 3 else "-", "because", 0.9
            ),
            status="applied",
        )
        for i, op in enumerate(ops)
    ]
    store.finish_run(
        run_id,
        status=status,
        error_code=error_code,
        error_message=None,
        turns=1,
        operations=outcomes,
        tool_calls=[],
        report_markdown=None,
    )


def _script(path: Path, *memory: str, job: tuple[str, ...] = ()) -> ReplayProvider:
    """A replay script: the job's lines, then the profile step's (marked for memory)."""
    lines = [json.dumps({"text": t}) for t in job]
    lines += [json.dumps({"text": t, "for": "memory"}) for t in memory]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return ReplayProvider(path)


# -- the table -----------------------------------------------------------------------------


def test_migration_two_creates_the_profiles_table(store: Store) -> None:
    _, rows = store.query("SELECT name FROM pragma_table_info('profiles') ORDER BY cid")
    assert [r[0] for r in rows] == [
        "user_id",
        "version",
        "created_at",
        "interactions",
        "profile_json",
        "source",
        "run_id",
    ]
    _, versions = store.query("SELECT version FROM schema_version ORDER BY version")
    assert (2,) in versions


def test_versions_are_appended_per_user_and_queryable_with_sql(store: Store) -> None:
    first = _profile(preferences={"naming_style": "Sentence case"})
    assert save_profile(store, first, source="synthesis", run_id="r1") == 1
    assert save_profile(store, _profile("bob"), source="synthesis") == 1
    second = _profile(preferences={"naming_style": "lowercase"}, interests=["cooking"])
    assert save_profile(store, second, source="consolidation", run_id="r2") == 2
    _, rows = store.query(
        "SELECT version, source, run_id, profile_json->>'$.preferences.naming_style' "
        "FROM profiles WHERE user_id = 'ann' ORDER BY version"
    )
    assert rows == [
        (1, "synthesis", "r1", "Sentence case"),
        (2, "consolidation", "r2", "lowercase"),
    ]
    assert load_profile(store, "ann").interests == ["cooking"]
    assert [h.version for h in profile_history(store, "ann")] == [2, 1]
    fresh = load_profile(store, "nobody")
    assert (fresh.user_id, fresh.interaction_count, fresh.preferences) == ("nobody", 0, {})
    assert latest_profile(store, "nobody") is None


def test_reset_appends_an_empty_version_and_keeps_history(store: Store) -> None:
    save_profile(store, _profile(interests=["cooking"]), source="synthesis")
    assert reset_profile(store, "ann") == 2
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.source == "reset" and latest.interactions == 0
    assert latest.profile.interests == [] and profile_prompt_context(store, "ann") == ""
    _, rows = store.query("SELECT count(*) FROM profiles WHERE user_id = 'ann'")
    assert rows == [(2,)]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM profiles",
        "UPDATE profiles SET source = 'x'",
        "INSERT INTO profiles VALUES ('a', 9, now(), 0, '{}', 'reset', NULL); DELETE FROM profiles",
    ],
)
def test_store_write_only_appends(store: Store, sql: str) -> None:
    save_profile(store, _profile(), source="synthesis")
    with pytest.raises(StoreError, match="exactly one INSERT"):
        store.write(sql)
    _, rows = store.query("SELECT user_id, version FROM profiles")
    assert rows == [("ann", 1)]


def test_a_source_outside_the_list_is_refused(store: Store) -> None:
    with pytest.raises(Exception, match="profile source must be one of"):
        save_profile(store, _profile(), source="manual")


# -- the librarian's context ---------------------------------------------------------------


def test_context_shows_naming_style_topics_and_what_this_user_undid(store: Store) -> None:
    save_profile(
        store,
        _profile(preferences={"naming_style": "Sentence case"}, interests=["databases"]),
        source="synthesis",
    )
    _run(store, "run-ann-1", "ann", ops=(("retag_note", "bread", "Sourdough starter"),))
    _run(store, "run-ann-2", "ann", ops=(("retitle_note", "misc/vacuum", "VACUUM"),), started=1)
    _run(store, "run-bob-1", "bob", ops=(("retag_note", "secret", "Bob's note"),), started=2)
    store.mark_operations_undone("run-ann-1")
    store.mark_operations_undone("run-bob-1")
    context = profile_prompt_context(store, "ann")
    lines = context.splitlines()
    assert lines[0] == "USER CONTEXT:"
    assert lines[1] == "NAMING STYLE: Sentence case"
    assert lines[2] == "TOPICS THEY CARE ABOUT: databases"
    assert lines[3] == (
        "THEY UNDID BEFORE (do not propose these again): retag_note bread (Sourdough starter)"
    )
    assert "VACUUM" not in context  # applied and kept: not a rejection
    assert "secret" not in context  # another user's undo
    # Undone operations alone are enough for a context (no profile needed).
    assert "retag_note secret" in profile_prompt_context(store, "bob")


def test_context_fits_its_token_budget(store: Store) -> None:
    save_profile(
        store,
        _profile(goals=[f"goal number {i} " * 5 for i in range(10)], interests=["databases"]),
        source="synthesis",
    )
    for budget in (8, 20, 60):
        context = profile_prompt_context(store, "ann", max_tokens=budget)
        assert estimate_tokens(context) <= budget
    assert "TOPICS THEY CARE ABOUT" in profile_prompt_context(store, "ann", max_tokens=20)


def test_context_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "not-a-db").mkdir()
    broken = Store(tmp_path / "not-a-db")  # a directory: every query fails
    with caplog.at_level(logging.WARNING, logger="toolwire.memory.profiles"):
        assert profile_prompt_context(broken, "ann") == ""
    assert "user context for 'ann' unavailable" in caplog.text


def test_record_undo_appends_a_failure_pattern(store: Store) -> None:
    _run(store, "run-ann-1", "ann", ops=(("retag_note", "a", "A"), ("retag_note", "b", "B")))
    assert record_undo(store, "ann", "run-ann-1") is None  # nothing undone yet
    store.mark_operations_undone("run-ann-1")
    assert record_undo(store, "ann", "run-ann-1") == 1
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.source == "undo" and latest.run_id == "run-ann-1"
    assert latest.profile.failure_patterns == ["undid run run-ann-: 2 retag_note"]


# -- after_run -----------------------------------------------------------------------------


def test_after_run_appends_a_version_learned_from_the_run(store: Store, tmp_path: Path) -> None:
    _run(store, "run-1", "ann")
    insights = {"preferences": {"naming_style": "Sentence case"}, "interests": ["cooking"]}
    provider = _script(tmp_path / "s.jsonl", json.dumps(insights))
    after_run(store, provider, "ann", "run-1")
    assert provider.remaining == 0
    latest = latest_profile(store, "ann")
    assert latest is not None
    assert (latest.version, latest.source, latest.run_id, latest.interactions) == (
        1,
        "synthesis",
        "run-1",
        1,
    )
    assert latest.profile.preferences == {"naming_style": "Sentence case"}
    assert latest.profile.interests == ["cooking"]


def test_the_synthesizer_is_told_a_retags_topics_not_its_title(store: Store) -> None:
    ops = (
        ("retag_note", "knife", "NOTE_TITLE", "cooking\n"),
        ("retitle_note", "dal", "Weeknight dal"),
    )
    _run(store, "run-1", "ann", ops=ops)
    told = interaction_from_run(store, "run-1")
    assert told.response.splitlines() == [
        "run ok",
        "applied retag_note knife as 'cooking'",
        "applied retitle_note dal titled 'Weeknight dal'",
    ]
    assert told.success and told.query


def test_after_run_consolidates_every_third_run(store: Store, tmp_path: Path) -> None:
    for i in range(1, 4):
        _run(store, f"run-{i}", "ann", started=i)
        replies = [json.dumps({"interests": [f"topic {i}"]})]
        if i == 3:
            replies.append(json.dumps({"interests": ["databases"], "goals": ["tidy runbooks"]}))
        provider = _script(tmp_path / f"s{i}.jsonl", *replies)
        after_run(store, provider, "ann", f"run-{i}")
        assert provider.remaining == 0
    _, rows = store.query(
        "SELECT version, source, interactions, run_id FROM profiles ORDER BY version"
    )
    assert rows == [
        (1, "synthesis", 1, "run-1"),
        (2, "synthesis", 2, "run-2"),
        (3, "consolidation", 3, "run-3"),
    ]
    profile = load_profile(store, "ann")
    assert profile.interests == ["databases"] and profile.goals == ["tidy runbooks"]
    assert profile.synthesis_version == 2


def test_after_run_drops_malformed_output_but_keeps_count(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _run(store, "run-1", "ann")
    provider = _script(tmp_path / "s.jsonl", "The user likes tidy notes.")
    with caplog.at_level(logging.WARNING, logger="toolwire.memory"):
        after_run(store, provider, "ann", "run-1")
    assert "insights dropped: no JSON object in the reply" in caplog.text
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.interactions == 1 and latest.profile.interests == []


def test_after_a_provider_fault_the_model_is_not_asked_again(store: Store, tmp_path: Path) -> None:
    _run(store, "run-1", "ann", ops=(), status="Failed", error_code="LLM_PROVIDER_TIMEOUT")
    provider = _script(tmp_path / "s.jsonl", '{"interests": ["x"]}')
    after_run(store, provider, "ann", "run-1")
    assert provider.remaining == 1  # not called
    latest = latest_profile(store, "ann")
    assert latest is not None and latest.interactions == 1


class _Exploding:
    name = "boom:model"
    supports_grammar = False

    def complete(self, request: object) -> object:
        raise RuntimeError("provider bug")

    def close(self) -> None:
        pass


def test_after_run_never_raises(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _run(store, "run-1", "ann")
    with caplog.at_level(logging.WARNING, logger="toolwire.memory"):
        after_run(store, _Exploding(), "ann", "run-1")  # a provider bug
        after_run(store, _Exploding(), "ann", "no-such-run")  # a missing run
        (tmp_path / "dir.duckdb").mkdir()
        after_run(Store(tmp_path / "dir.duckdb"), _Exploding(), "ann", "run-1")  # broken store
    assert caplog.text.count("not updated after run") == 3
    assert "provider bug" in caplog.text
    _, rows = store.query("SELECT count(*) FROM profiles")
    assert rows == [(0,)]


# -- CLI -----------------------------------------------------------------------------------


def test_cli_show_and_reset(store: Store) -> None:
    from toolwire.cli import app

    save_profile(
        store,
        _profile(preferences={"naming_style": "Sentence case"}, interests=["databases"]),
        source="synthesis",
        run_id="run-1",
    )
    runner = CliRunner()
    db = str(store.path)
    shown = runner.invoke(app, ["profile", "show", "ann", "--db", db])
    assert shown.exit_code == 0, shown.output
    assert "profile of 'ann': version 1 (synthesis), 1 interactions" in shown.output
    assert "NAMING STYLE: Sentence case" in shown.output
    reset = runner.invoke(app, ["profile", "reset", "ann", "--db", db])
    assert reset.exit_code == 0 and "version 2 is empty" in reset.output
    as_json = runner.invoke(app, ["profile", "show", "ann", "--db", db, "--format", "json"])
    document = json.loads(as_json.output)
    assert document["version"] == 2 and document["context"] == ""
    assert [v["source"] for v in document["versions"]] == ["reset", "synthesis"]
    assert document["profile"]["preferences"] == {}


def test_cli_refuses_a_missing_db(tmp_path: Path) -> None:
    from toolwire.cli import app

    result = CliRunner().invoke(app, ["profile", "show", "ann", "--db", str(tmp_path / "no.db")])
    assert result.exit_code == 1
    assert not (tmp_path / "no.db").exists()


# -- the model's tokenizer -----------------------------------------------------------------


def test_the_models_tokenizer_counts_context(tmp_path: Path) -> None:
    from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path

    gguf = resolve_model_path("smollm2-135m", tmp_path)
    provider = LlamaCppProvider(gguf, name="llamacpp:smollm2-135m", n_ctx=512)
    try:
        count = token_counter(provider)
        text = "GOAL: retag the etcd runbooks by subsystem"
        assert count(text) == len(provider.tokenize(text))
        assert count(text) != estimate_tokens(text)  # a real count, not the estimate
        goal = "retag the etcd compaction runbooks " * 40
        for budget in (10, 50, 200):
            assert count(truncate_to_tokens(goal, budget, count)) <= budget
    finally:
        provider.close()


# -- the librarian, twice (needs memory wired into librarian/job.py) -----------------------

LIBRARIAN_OK = """<librarian_response>
<request_id>{{request_id}}</request_id>
<status>ok</status>
<summary>Retag the bread note.</summary>
<operations>
<operation>
<operation_id>op_1</operation_id>
<kind>retag_note</kind>
<target_note_id>bread</target_note_id>
<title>Sourdough starter</title>
<body_markdown>cooking</body_markdown>
<reason>The note is about baking bread.</reason>
<confidence>0.9</confidence>
</operation>
</operations>
<warnings></warnings>
</librarian_response>"""

NOTES = {
    "bread.md": "---\ntitle: Sourdough starter\ntags: [databases]\n---\n# Sourdough starter\n\n"
    "Feed the starter twice a day.\n",
    "vacuum.md": "# Postgres VACUUM\n\nVACUUM reclaims space held by dead tuples.\n",
}


def _librarian_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"""name: librarian-memory
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, cooking, travel]
constraints:
  batch_size: 10
  max_operations: 5
  allowed_kinds: [retag_note, retitle_note, defer]
""",
        encoding="utf-8",
    )
    return spec


def _prompt_text(store: Store, run_id: str) -> str:
    _, rows = store.query("SELECT prompt_json FROM attempts WHERE run_id = ?", [run_id])
    return "\n".join(m["content"] for (p,) in rows for m in json.loads(p))


def test_two_librarian_runs_evolve_the_profile_and_shape_the_second_request(
    tmp_path: Path,
) -> None:
    from toolwire.jobs import RunOptions
    from toolwire.librarian.journal.write_ahead import undo_run
    from toolwire.lifecycle import run_job

    ws = tmp_path / "notes"
    ws.mkdir()
    for name, text in NOTES.items():
        (ws / name).write_text(text, encoding="utf-8")
    db, spec = tmp_path / "store.duckdb", _librarian_spec(tmp_path)
    first_insights = {"preferences": {"naming_style": "Sentence case"}, "interests": ["databases"]}
    second_insights = {"interests": ["cooking"], "failure_pattern": "retagging bread notes"}

    def run_once() -> tuple[Any, Any]:
        # The run lifecycle every entry point uses: the job, then the user's profile.
        started: list[Any] = []
        options = RunOptions(str(spec), workspace=str(ws), db=str(db), user="ann")
        return run_job(options, on_start=started.append), started[0]

    _script(tmp_path / "script.jsonl", json.dumps(first_insights), job=(LIBRARIAN_OK,))
    first, ctx1 = run_once()
    assert first.ok
    assert ctx1.provider.remaining == 0, "after_run did not ask the model for insights"
    # The user rejects run 1, exactly as `toolwire undo` does.
    undo_run(ws, first.run_id)
    ctx1.store.mark_operations_undone(first.run_id)

    _script(tmp_path / "script.jsonl", json.dumps(second_insights), job=(LIBRARIAN_OK,))
    second, ctx2 = run_once()
    assert second.ok and ctx2.provider.remaining == 0

    store = Store(db)
    _, versions = store.query(
        "SELECT version, source, run_id, interactions, profile_json FROM profiles "
        "WHERE user_id = 'ann' ORDER BY version"
    )
    assert [v[:4] for v in versions] == [
        (1, "synthesis", first.run_id, 1),
        (2, "synthesis", second.run_id, 2),
    ]
    v1, v2 = (json.loads(v[4]) for v in versions)
    assert v1["preferences"] == {"naming_style": "Sentence case"}
    assert v1["interests"] == ["databases"]
    assert v2["interests"] == ["databases", "cooking"]
    assert v2["failure_patterns"] == ["retagging bread notes"]

    assert "<user_profile>" not in _prompt_text(store, first.run_id)
    second_prompt = _prompt_text(store, second.run_id)
    # Beside the request, never inside its <goal> (issue 16 item 19).
    assert "<user_profile>" in second_prompt.split("</librarian_request>", 1)[1]
    assert "NAMING STYLE: Sentence case" in second_prompt
    assert "TOPICS THEY CARE ABOUT: databases" in second_prompt
    assert "retag_note bread (Sourdough starter)" in second_prompt
