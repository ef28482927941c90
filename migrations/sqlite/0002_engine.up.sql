-- 0002_engine: what workers need. Engine state on jobs, stage checkpoints,
-- the LLM attempt journal and the transactional outbox.
--
-- The SQLite twin of postgres/0002_engine.up.sql, with 0001's type mapping:
-- booleans are INTEGER 0 or 1, bytea is BLOB, jsonb is TEXT that json_valid
-- accepts, timestamps are integer unix microseconds supplied by the store.

-- retry_wait: the job is not claimable before run_after.
ALTER TABLE jobs ADD COLUMN run_after INTEGER;
-- Set by CancelJob on a running job; the worker learns it at its next
-- heartbeat.
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1));
-- The retry budget counts from budget_started_at (submit, or the last
-- replay): budget_attempts claims and budget_tokens billed tokens since.
-- SQLite adds a NOT NULL column only with a constant default, so the store
-- sets it on insert (to created_at, as Postgres's now() does) and existing
-- jobs take their created_at below.
ALTER TABLE jobs ADD COLUMN budget_started_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN budget_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN budget_tokens INTEGER NOT NULL DEFAULT 0;

UPDATE jobs SET budget_started_at = created_at;

-- Claiming reads one index in the order jobs became claimable: a queued job
-- when it was created, a retry_wait job at run_after, a running job when its
-- lease expires (a takeover). Running jobs with a live lease sort after now,
-- so a claim's range scan stops before them. Supersedes 0001's index of the
-- same name. SQLite uses an expression index only for a query that repeats
-- the expression and the WHERE terms exactly (see JobClaimCandidates).
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON jobs ((
    CASE WHEN status = 'running' THEN lease_until
        ELSE coalesce(run_after, created_at) END
)) WHERE status IN ('queued', 'retry_wait', 'running');

-- One row per stage (chunk = -1) or per chunk of a stage: its result, keyed
-- by the stage key for the decision cache.
CREATE TABLE job_checkpoints (
    job_id       TEXT    NOT NULL REFERENCES jobs (id),
    tenant       TEXT    NOT NULL,
    stage        TEXT    NOT NULL CHECK (stage IN (
                     'uploaded', 'text_extracted', 'chunks_ready', 'llm_done',
                     'validated', 'published')),
    chunk        INTEGER NOT NULL,
    stage_key    TEXT    NOT NULL,
    code_version TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    output       BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (job_id, stage, chunk)
) STRICT;

-- The decision cache: the newest result of a stage key in the tenant.
CREATE INDEX job_checkpoints_stage_key_idx ON job_checkpoints (tenant, stage_key, created_at DESC);

-- The journal of LLM calls: one row per attempt, whatever its outcome.
-- AUTOINCREMENT: ids are never reused, like a bigserial's.
CREATE TABLE llm_attempts (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id              TEXT    NOT NULL REFERENCES jobs (id),
    tenant              TEXT    NOT NULL,
    job_attempt         INTEGER NOT NULL,
    stage               TEXT    NOT NULL,
    chunk               INTEGER NOT NULL,
    provider_key        TEXT    NOT NULL,
    outcome             TEXT    NOT NULL CHECK (outcome IN (
                            'succeeded', 'rate_limited', 'unavailable',
                            'invalid_request', 'outcome_unknown', 'invalid_output',
                            'cancelled')),
    billed              INTEGER NOT NULL CHECK (billed IN (0, 1)),
    prompt_tokens       INTEGER NOT NULL DEFAULT 0,
    completion_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_micros         INTEGER NOT NULL DEFAULT 0,
    latency_ms          INTEGER NOT NULL DEFAULT 0,
    provider_request_id TEXT    NOT NULL DEFAULT '',
    error               TEXT    NOT NULL DEFAULT '',
    created_at          INTEGER NOT NULL
) STRICT;

CREATE INDEX llm_attempts_job_idx ON llm_attempts (job_id, id);

-- Events to deliver outside the database, written in the transaction of the
-- change they announce. event_id is stable per (job, event type): sinks use
-- it as their idempotency key. AUTOINCREMENT: the relay delivers in id
-- order, so an id is never reused.
CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id     TEXT    NOT NULL UNIQUE,
    tenant       TEXT    NOT NULL,
    job_id       TEXT    NOT NULL REFERENCES jobs (id),
    event_type   TEXT    NOT NULL,
    payload      TEXT    NOT NULL CHECK (json_valid(payload)),
    created_at   INTEGER NOT NULL,
    published_at INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX outbox_job_idx ON outbox (job_id, id);

-- What the relay has still to deliver, in order.
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;
