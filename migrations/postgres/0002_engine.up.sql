-- 0002_engine: what workers need. Engine state on jobs, stage checkpoints,
-- the LLM attempt journal and the transactional outbox.

ALTER TABLE jobs
    -- retry_wait: the job is not claimable before run_after.
    ADD COLUMN run_after         timestamptz,
    -- Set by CancelJob on a running job; the worker learns it at its next
    -- heartbeat.
    ADD COLUMN cancel_requested  boolean     NOT NULL DEFAULT false,
    -- The retry budget counts from budget_started_at (submit, or the last
    -- replay): budget_attempts claims and budget_tokens billed tokens since.
    ADD COLUMN budget_started_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN budget_attempts   integer     NOT NULL DEFAULT 0,
    ADD COLUMN budget_tokens     bigint      NOT NULL DEFAULT 0;

-- Claiming reads one index in the order jobs became claimable: a queued job
-- when it was created, a retry_wait job at run_after, a running job when its
-- lease expires (a takeover). Running jobs with a live lease sort after now(),
-- so a claim's range scan stops before them. Supersedes 0001's index of the
-- same name.
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON jobs ((
    CASE WHEN status = 'running' THEN lease_until
        ELSE coalesce(run_after, created_at) END
)) WHERE status IN ('queued', 'retry_wait', 'running');

-- One row per stage (chunk = -1) or per chunk of a stage: its result, keyed
-- by the stage key for the decision cache.
CREATE TABLE job_checkpoints (
    job_id       uuid        NOT NULL REFERENCES jobs (id),
    tenant       text        NOT NULL,
    stage        text        NOT NULL CHECK (stage IN (
                     'uploaded', 'text_extracted', 'chunks_ready', 'llm_done',
                     'validated', 'published')),
    chunk        integer     NOT NULL,
    stage_key    text        NOT NULL,
    code_version text        NOT NULL,
    attempt      integer     NOT NULL,
    output       bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, stage, chunk)
);

-- The decision cache: the newest result of a stage key in the tenant.
CREATE INDEX job_checkpoints_stage_key_idx ON job_checkpoints (tenant, stage_key, created_at DESC);

-- The journal of LLM calls: one row per attempt, whatever its outcome.
CREATE TABLE llm_attempts (
    id                  bigserial   PRIMARY KEY,
    job_id              uuid        NOT NULL REFERENCES jobs (id),
    tenant              text        NOT NULL,
    job_attempt         integer     NOT NULL,
    stage               text        NOT NULL,
    chunk               integer     NOT NULL,
    provider_key        text        NOT NULL,
    outcome             text        NOT NULL CHECK (outcome IN (
                            'succeeded', 'rate_limited', 'unavailable',
                            'invalid_request', 'outcome_unknown', 'invalid_output',
                            'cancelled')),
    billed              boolean     NOT NULL,
    prompt_tokens       bigint      NOT NULL DEFAULT 0,
    completion_tokens   bigint      NOT NULL DEFAULT 0,
    cost_micros         bigint      NOT NULL DEFAULT 0,
    latency_ms          bigint      NOT NULL DEFAULT 0,
    provider_request_id text        NOT NULL DEFAULT '',
    error               text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX llm_attempts_job_idx ON llm_attempts (job_id, id);

-- Events to deliver outside the database, written in the transaction of the
-- change they announce. event_id is stable per (job, event type): sinks use
-- it as their idempotency key.
CREATE TABLE outbox (
    id           bigserial   PRIMARY KEY,
    event_id     text        NOT NULL UNIQUE,
    tenant       text        NOT NULL,
    job_id       uuid        NOT NULL REFERENCES jobs (id),
    event_type   text        NOT NULL,
    payload      jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text        NOT NULL DEFAULT ''
);

CREATE INDEX outbox_job_idx ON outbox (job_id, id);

-- What the relay has still to deliver, in order.
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;
