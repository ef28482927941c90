-- 0032_jobs_column_order: the columns of jobs in the order a job's updates
-- change them, so that each update logs only the bytes it changed (issue
-- 33; docs/performance.md, "The job row's column order, and a one-key
-- decision-cache read").
--
-- An update whose new version stays on the page of the old one logs only
-- the new tuple's bytes between the longest common prefix and the longest
-- common suffix of the two versions (Postgres's log_heap_update, with
-- wal_level replica). With the columns in the order migrations added
-- them, the post-call update (stage, usage, last_event_seq, updated_at)
-- spanned from stage, the tenth column, to budget_tokens, the 35th: the
-- output, the document's sha256, params and labels between them were logged
-- at every update, about 320 bytes a heap-only update. Here the columns set
-- at insert and never changed by the engine come first, then what the
-- publish sets (error, deduplicated_from, output, finished_at), then what
-- the claim sets (status, attempt, the lease), then what every fenced write
-- sets (stage, usage, last_event_seq, updated_at).
--
-- Postgres cannot reorder a table's columns: the table is rebuilt, its
-- rows copied, and its indexes, constraints and triggers made again with
-- the same names and definitions. The copy holds jobs exclusively for its
-- duration (a table of a million jobs: tens of seconds).
ALTER TABLE jobs RENAME TO jobs_before_0032;

CREATE TABLE jobs (
    -- Set at submit; the engine never changes them.
    id                  uuid        NOT NULL,
    tenant              text        NOT NULL,
    idempotency_key     text        NOT NULL,
    dedup_key           text        NOT NULL,
    pipeline            text        NOT NULL,
    pipeline_version    integer     NOT NULL,
    prompt_version      text        NOT NULL DEFAULT '',
    model_profile       text        NOT NULL DEFAULT '',
    document_sha256     text        NOT NULL,
    document_media_type text        NOT NULL,
    document_name       text        NOT NULL DEFAULT '',
    document_size_bytes bigint      NOT NULL,
    params              jsonb       NOT NULL DEFAULT '{}',
    labels              jsonb       NOT NULL DEFAULT '{}',
    traceparent         text        NOT NULL DEFAULT '',
    run_id              uuid,
    priority            text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- Changed by operators (cancel, approve, replay), not by a job's run.
    budget_started_at   timestamptz NOT NULL DEFAULT now(),
    generation          integer     NOT NULL DEFAULT 0,
    approved            boolean     NOT NULL DEFAULT false,
    cancel_requested    boolean     NOT NULL DEFAULT false,
    -- Set when the job ends.
    error               jsonb,
    deduplicated_from   uuid,
    output              jsonb,
    finished_at         timestamptz,
    -- Set by the claim (and the publish, which ends the lease).
    status              text        NOT NULL,
    attempt             integer     NOT NULL DEFAULT 0,
    budget_attempts     integer     NOT NULL DEFAULT 0,
    run_after           timestamptz,
    lease_owner         text,
    lease_until         timestamptz,
    -- Set by every fenced write of a run.
    stage               text        NOT NULL DEFAULT 'uploaded',
    last_event_seq      integer     NOT NULL DEFAULT 1,
    llm_calls           integer     NOT NULL DEFAULT 0,
    prompt_tokens       bigint      NOT NULL DEFAULT 0,
    completion_tokens   bigint      NOT NULL DEFAULT 0,
    cost_micros         bigint      NOT NULL DEFAULT 0,
    budget_tokens       bigint      NOT NULL DEFAULT 0,
    updated_at          timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

INSERT INTO jobs (
    id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, prompt_version, model_profile,
    document_sha256, document_media_type, document_name, document_size_bytes, params, labels,
    traceparent, run_id, priority, created_at, budget_started_at, generation, approved, cancel_requested,
    error, deduplicated_from, output, finished_at,
    status, attempt, budget_attempts, run_after, lease_owner, lease_until,
    stage, last_event_seq, llm_calls, prompt_tokens, completion_tokens, cost_micros, budget_tokens, updated_at)
SELECT
    id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, prompt_version, model_profile,
    document_sha256, document_media_type, document_name, document_size_bytes, params, labels,
    traceparent, run_id, priority, created_at, budget_started_at, generation, approved, cancel_requested,
    error, deduplicated_from, output, finished_at,
    status, attempt, budget_attempts, run_after, lease_owner, lease_until,
    stage, last_event_seq, llm_calls, prompt_tokens, completion_tokens, cost_micros, budget_tokens, updated_at
FROM jobs_before_0032;

DROP TABLE jobs_before_0032;

ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN (
    'queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown',
    'succeeded', 'failed', 'cancelled', 'dead_lettered'));
ALTER TABLE jobs ADD CONSTRAINT jobs_stage_check CHECK (stage IN (
    'uploaded', 'text_extracted', 'chunks_ready', 'llm_done', 'validated', 'published'));
ALTER TABLE jobs ADD CONSTRAINT jobs_priority_check CHECK (priority = 'batch') NOT VALID;
ALTER TABLE jobs ADD CONSTRAINT jobs_deduplicated_from_fkey
    FOREIGN KEY (deduplicated_from) REFERENCES jobs (id);

CREATE INDEX jobs_tenant_created_idx ON jobs (tenant, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_status_created_idx ON jobs (tenant, status, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_pipeline_created_idx ON jobs (tenant, pipeline, created_at DESC, id DESC);
CREATE UNIQUE INDEX jobs_computed_success_key ON jobs (tenant, dedup_key)
    WHERE status = 'succeeded' AND deduplicated_from IS NULL;
CREATE INDEX jobs_claimable_idx ON jobs ((
    CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END))
    WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown');
CREATE INDEX jobs_active_status_pipeline_idx ON jobs (status, pipeline)
    WHERE status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown');

CREATE TRIGGER jobs_announce
    AFTER INSERT OR UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'dead_lettered', 'cancelled',
        'awaiting_approval', 'outcome_unknown'))
    EXECUTE FUNCTION jobs_announce();
CREATE TRIGGER jobs_next_generation
    BEFORE UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (OLD.status IN ('failed', 'dead_lettered') AND NEW.status = 'queued')
    EXECUTE FUNCTION jobs_next_generation();

-- Statistics for the copied rows at once, as the old table had them (the
-- engine's generic plans are gated on them: docs/architecture.md, "Generic
-- plans for the engine, custom plans for the rest"). An empty table is left
-- never analyzed, as a new database's is.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs) THEN
        ANALYZE jobs;
    END IF;
END $$;
