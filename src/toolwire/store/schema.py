"""Store schema: the DDL of every table as forward-only migrations, and the row shapes.

A migration is frozen once released: change the schema by appending a new
``(version, sql)`` pair, never by editing an old one, because files written by
older versions replay only the migrations they lack. Timestamps are naive UTC.
Column names follow the OpenTelemetry GenAI conventions where one exists
(``input_tokens``, ``output_tokens``, ``finish_reason``, tool name).

No foreign keys: DuckDB rewrites some UPDATEs on referenced rows as
delete+insert and rejects them, and ``runs`` is updated when a run finishes.
The writers in ``store.py`` check that a run exists instead.

The Arrow row builders (``store.rows``) give each bulk-inserted table the column
names and types of the DDL here; the column tuples below are what they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolwire.errors import StoreError
from toolwire.store.views import REPAIR_STATS_V2, RUN_SUMMARY_V2, VIEWS_V1

if TYPE_CHECKING:
    pass

__all__ = [
    "ATTEMPT_COLUMNS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "OPERATION_COLUMNS",
    "OPERATION_STATUSES",
    "RUN_COLUMNS",
    "RUN_STATUSES",
    "SCHEMA_VERSION_DDL",
    "TOOL_CALL_COLUMNS",
    "pending_migrations",
]

# 'unchecked': a run that ended as its model said it should, with nothing that proves it
# did its job (a tool agent whose spec declares no check; agent.checks).
RUN_STATUSES: tuple[str, ...] = ("running", "ok", "unchecked", "Failed")
OPERATION_STATUSES: tuple[str, ...] = ("applied", "rejected", "deferred", "planned", "undone")

# Created (if missing) before migrations run, in the same transaction.
SCHEMA_VERSION_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER PRIMARY KEY,
    applied_at TIMESTAMP NOT NULL
);
"""

_TABLES_V1 = """
CREATE TABLE specs (
    spec_hash      VARCHAR PRIMARY KEY,
    name           VARCHAR,
    version        VARCHAR,
    yaml_text      VARCHAR,
    canonical_json VARCHAR,
    first_seen     TIMESTAMP
);

CREATE TABLE prompt_packs (
    pack_hash     VARCHAR PRIMARY KEY,
    manifest_json VARCHAR,
    first_seen    TIMESTAMP
);

CREATE TABLE prompt_pack_files (
    pack_hash VARCHAR NOT NULL,
    name      VARCHAR NOT NULL,
    sha256    VARCHAR,
    content   BLOB,
    PRIMARY KEY (pack_hash, name)
);

CREATE TABLE runs (
    run_id        VARCHAR PRIMARY KEY,
    spec_hash     VARCHAR,
    pack_hash     VARCHAR,
    spec_name     VARCHAR,
    job           VARCHAR,              -- 'librarian' | 'agent'
    transport     VARCHAR,
    provider      VARCHAR,
    model         VARCHAR,
    workspace     VARCHAR,
    user_id       VARCHAR,
    flow_run_id   VARCHAR,
    batch_id      VARCHAR,
    status        VARCHAR NOT NULL DEFAULT 'running',  -- 'running' | 'ok' | 'unchecked' | 'Failed'
    error_code    VARCHAR,
    error_message VARCHAR,
    dry_run       BOOLEAN NOT NULL DEFAULT false,
    turns         INTEGER NOT NULL DEFAULT 0,
    started_at    TIMESTAMP NOT NULL,
    ended_at      TIMESTAMP,
    settings_json VARCHAR
);

CREATE TABLE attempts (
    run_id        VARCHAR NOT NULL,
    turn          INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,     -- 0 = first try, 1.. = repairs
    kind          VARCHAR NOT NULL,     -- 'initial' | 'repair'
    request_id    VARCHAR,
    prompt_json   VARCHAR,              -- the messages sent, JSON
    raw_text      VARCHAR NOT NULL,     -- every raw output, even unparseable ones
    parse_ok      BOOLEAN NOT NULL,
    error_code    VARCHAR,
    error_codes   VARCHAR[],
    input_tokens  INTEGER,
    output_tokens INTEGER,
    latency_ms    DOUBLE,
    finish_reason VARCHAR,
    started_at    TIMESTAMP,
    PRIMARY KEY (run_id, turn, attempt)
);

CREATE TABLE tool_calls (
    run_id       VARCHAR NOT NULL,
    turn         INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    slot         VARCHAR,
    tool         VARCHAR,
    command      VARCHAR,
    source       VARCHAR,
    status       VARCHAR,
    duration_ms  DOUBLE,
    args_bytes   INTEGER,
    result_bytes INTEGER,
    error        VARCHAR,
    PRIMARY KEY (run_id, turn, seq)
);

CREATE TABLE operations (
    run_id        VARCHAR NOT NULL,
    turn          INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    operation_id  VARCHAR,
    kind          VARCHAR,
    target        VARCHAR,
    path          VARCHAR,
    title         VARCHAR,
    confidence    DOUBLE,
    reason        VARCHAR,
    status        VARCHAR NOT NULL,     -- applied | rejected | deferred | planned | undone
    code          VARCHAR,
    detail        VARCHAR,
    before_sha256 VARCHAR,
    after_sha256  VARCHAR,
    PRIMARY KEY (run_id, turn, seq)
);

CREATE TABLE reports (
    run_id     VARCHAR PRIMARY KEY,
    markdown   VARCHAR,
    created_at TIMESTAMP
);
"""

# User profiles (toolwire.memory, seed 004): append-only, every version kept;
# a reset appends an empty profile. source: synthesis | consolidation | reset | undo.
_PROFILES_V2 = """
CREATE TABLE profiles (
    user_id      VARCHAR NOT NULL,
    version      INTEGER NOT NULL,      -- 1, 2, ... per user
    created_at   TIMESTAMP NOT NULL,
    interactions INTEGER NOT NULL,      -- runs the profile has learned from
    profile_json VARCHAR NOT NULL,      -- toolwire.memory.state.UserProfile.to_dict()
    source       VARCHAR NOT NULL,
    run_id       VARCHAR,               -- the run that produced this version, if any
    PRIMARY KEY (user_id, version)
);
"""

# Batch outcomes and data-quality results (toolwire.flows.batch, toolwire.store.quality).
# runs.batch_id links a run to its batch; quality_checks has one row per expectation.
_BATCH_QUALITY_V3 = """
CREATE TABLE batches (
    batch_id    VARCHAR PRIMARY KEY,
    spec_hash   VARCHAR,
    spec_path   VARCHAR,
    flow_run_id VARCHAR,
    task_runner VARCHAR,              -- 'threads' | 'processes' | 'dask'
    max_workers INTEGER,
    planned     INTEGER NOT NULL,     -- runs in the cross product
    finished    INTEGER NOT NULL,     -- runs that ended 'ok' or 'Failed'
    failed      INTEGER NOT NULL,     -- of those, 'Failed'
    lost        INTEGER NOT NULL,     -- planned runs with no finished row in the store
    quality_ok  BOOLEAN,              -- NULL when the checks were skipped
    check_id    VARCHAR,
    started_at  TIMESTAMP NOT NULL,
    ended_at    TIMESTAMP
);

CREATE TABLE quality_checks (
    check_id         VARCHAR NOT NULL,
    batch_id         VARCHAR,
    expectation      VARCHAR NOT NULL,  -- e.g. 'runs.spec_hash_is_64_hex'
    table_name       VARCHAR,
    success          BOOLEAN NOT NULL,
    checked_rows     BIGINT,
    unexpected_count BIGINT,
    sample_json      VARCHAR,           -- a few offending rows (JSON) or the GE error
    checked_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (check_id, expectation)
);
"""

# The operation's body as the model proposed it: a retag's topics (one per line), a
# rewrite's or create's text. Rows stored before version 4 hold NULL.
_OPERATION_BODY_V4 = """
ALTER TABLE operations ADD COLUMN body_markdown VARCHAR;
"""

# What a run skipped or worked around and must not vanish silently (issue #16 items 13
# and 22): a note skipped for bad bytes, a bad name or unusable front matter; a dry run
# that left an interrupted journal pending. One row per warning, in the order seen.
_RUN_WARNINGS_V5 = """
CREATE TABLE run_warnings (
    run_id     VARCHAR NOT NULL,
    seq        INTEGER NOT NULL,
    message    VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

# What each run changed in a note, field by field (librarian/summary.py): old -> new for
# topic, title, tags; "body" for a body-only edit; "note" for a created note.
_NOTE_CHANGES_V6 = """
CREATE TABLE note_changes (
    run_id     VARCHAR NOT NULL,
    seq        INTEGER NOT NULL,
    path       VARCHAR NOT NULL,
    field      VARCHAR NOT NULL,
    old_value  VARCHAR NOT NULL,
    new_value  VARCHAR NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

# What each tool call was given and gave back (issue #19 item 6: the report shows them):
# the arguments as JSON and the result as the model read it; for a refused call, what the
# model was told; for the final report, its status and content. Older rows hold NULL.
_TOOL_CALL_TEXT_V7 = """
ALTER TABLE tool_calls ADD COLUMN args_json VARCHAR;
ALTER TABLE tool_calls ADD COLUMN result_text VARCHAR;
"""

# What `toolwire review` asks and what the user answered (issue 28 item 2). A question is
# a note a librarian run deferred, or whose current topic the scorer rated far below
# another, with its candidates and the evidence shown. An answer is kept before it is
# applied (never lost): a topic (applied as a run of its own, ``applied_run_id``) or
# ``not_a_topic``, which keeps the note out of later questions until its bytes change.
_REVIEW_QUESTIONS = """
CREATE TABLE review_questions (
    run_id          VARCHAR NOT NULL,   -- the librarian run that asked
    seq             INTEGER NOT NULL,
    workspace       VARCHAR NOT NULL,
    note_path       VARCHAR NOT NULL,
    note_id         VARCHAR,
    content_sha256  VARCHAR NOT NULL,   -- the note's bytes when asked
    kind            VARCHAR NOT NULL,   -- 'deferred' | 'misfiled'
    current_topic   VARCHAR,
    candidates_json VARCHAR NOT NULL,   -- [{topic, confidence, evidence}], best first
    why             VARCHAR,
    created_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE review_answers (
    answer_id       VARCHAR PRIMARY KEY,
    question_run_id VARCHAR NOT NULL,
    workspace       VARCHAR NOT NULL,
    note_path       VARCHAR NOT NULL,
    content_sha256  VARCHAR NOT NULL,   -- the note's bytes the answer was given for
    answer          VARCHAR NOT NULL,   -- 'topic' | 'not_a_topic'
    topic           VARCHAR,
    answer_sha256   VARCHAR NOT NULL,   -- the note's bytes once the answer is applied
    applied_run_id  VARCHAR,            -- the run that writes it (NULL: nothing to write)
    user_id         VARCHAR,
    source          VARCHAR,            -- 'prompt' | 'cli' | 'file'
    answered_at     TIMESTAMP NOT NULL
);
"""

# Per-note evidence kept between runs (store/evidence.py, issue 29): embeddings by the
# sha256 of the exact text embedded (+ embedder id and passage/query kind), the last
# decision per note with the key of its inputs, and what each run computed or reused.
_NOTE_EVIDENCE = """
CREATE TABLE embedding_cache (
    text_sha256 VARCHAR NOT NULL,
    embedder    VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,       -- 'passage' (notes) | 'query' (topics)
    vector      FLOAT[] NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (text_sha256, embedder, kind)
);

CREATE TABLE note_evidence (
    workspace      VARCHAR NOT NULL,
    note_id        VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,    -- the note's bytes when it was decided
    decision_key   VARCHAR NOT NULL,    -- sha256 of every input of the decision
    decision       VARCHAR NOT NULL,    -- keep | retag | defer
    topic          VARCHAR,             -- the best candidate
    run_id         VARCHAR NOT NULL,    -- the run that decided it
    PRIMARY KEY (workspace, note_id)
);

CREATE TABLE run_costs (
    run_id               VARCHAR PRIMARY KEY,
    notes                INTEGER NOT NULL,
    texts_embedded       INTEGER NOT NULL,  -- embedder cache misses (texts sent to it)
    embedding_hits       INTEGER NOT NULL,
    decisions_recomputed INTEGER NOT NULL,  -- notes whose inputs or decision changed
    decisions_reused     INTEGER NOT NULL,
    notes_to_model       INTEGER NOT NULL,  -- notes in a request the model answers
    full_pass            BOOLEAN NOT NULL
);
"""

# The day (UTC) a cached embedding was last looked up or computed (issue 29 follow-up):
# a run refreshes the rows it read, in one statement, and rows unused for more than
# TOOLWIRE_KEEP_EMBEDDINGS_DAYS are deleted. A DATE, not a timestamp: a second run on
# the same day rewrites nothing. Rows stored before this version count as used the day
# the file upgrades (the migration's own day, in UTC like every timestamp here).
_EMBEDDING_LAST_USED = """
ALTER TABLE embedding_cache ADD COLUMN last_used DATE;
UPDATE embedding_cache SET last_used = CAST(current_timestamp AT TIME ZONE 'UTC' AS DATE);
"""

# (version, sql), applied in order. Never edit a released entry: append a new one.
MIGRATIONS: list[tuple[int, str]] = [
    (1, _TABLES_V1 + VIEWS_V1),
    (2, _PROFILES_V2),
    (3, _BATCH_QUALITY_V3),
    (4, _OPERATION_BODY_V4),
    (5, _RUN_WARNINGS_V5),
    (6, _NOTE_CHANGES_V6),
    (7, _TOOL_CALL_TEXT_V7),
    (8, _REVIEW_QUESTIONS),
    (9, _NOTE_EVIDENCE),
    (10, RUN_SUMMARY_V2),  # run_summary_planned: ops_planned and dry_run (issue 33)
    # repair_stats_without_first_tool: attempts.kind may be 'first_tool' (attempt -1, the
    # side request that picks a grammar run's first tool); repair_stats leaves it out.
    (11, REPAIR_STATS_V2),
    # embedding_cache_last_used: the day each cached embedding was last looked up, so
    # rows no run uses any more can be evicted (store/evidence.py).
    (12, _EMBEDDING_LAST_USED),
    # note_evidence_left_bytes: a retag's record now holds the bytes the run *left*
    # (librarian/decisions.evidence_after_apply); the older rows hold the bytes it judged,
    # so a fresh copy of those notes passed as already done. Forgetting them costs one
    # recomputed decision per note (numpy, no model call).
    (13, "DELETE FROM note_evidence WHERE decision = 'retag';"),
]

LATEST_VERSION: int = MIGRATIONS[-1][0]

# Column order of the tables the writers fill; tests check them against the DDL.
RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "spec_hash",
    "pack_hash",
    "spec_name",
    "job",
    "transport",
    "provider",
    "model",
    "workspace",
    "user_id",
    "flow_run_id",
    "batch_id",
    "status",
    "error_code",
    "error_message",
    "dry_run",
    "turns",
    "started_at",
    "ended_at",
    "settings_json",
)
ATTEMPT_COLUMNS: tuple[str, ...] = (
    "run_id",
    "turn",
    "attempt",
    "kind",
    "request_id",
    "prompt_json",
    "raw_text",
    "parse_ok",
    "error_code",
    "error_codes",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "finish_reason",
    "started_at",
)
TOOL_CALL_COLUMNS: tuple[str, ...] = (
    "run_id",
    "turn",
    "seq",
    "slot",
    "tool",
    "command",
    "source",
    "status",
    "duration_ms",
    "args_bytes",
    "result_bytes",
    "error",
    "args_json",
    "result_text",
)
OPERATION_COLUMNS: tuple[str, ...] = (
    "run_id",
    "turn",
    "seq",
    "operation_id",
    "kind",
    "target",
    "path",
    "title",
    "confidence",
    "reason",
    "status",
    "code",
    "detail",
    "before_sha256",
    "after_sha256",
    "body_markdown",
)


def pending_migrations(
    current: int, migrations: list[tuple[int, str]] | None = None
) -> list[tuple[int, str]]:
    """Migrations a file at schema ``current`` still needs, in order.

    A file newer than this code cannot be written safely (its tables may have
    columns or meanings we do not know), so that is an error, not a no-op.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    latest = migrations[-1][0] if migrations else 0
    if current > latest:
        raise StoreError(
            f"store schema version {current} is newer than this toolwire supports "
            f"({latest}); upgrade toolwire or use another --db file"
        )
    return [(version, sql) for version, sql in migrations if version > current]
