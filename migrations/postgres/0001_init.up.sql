-- 0001_init: documents, idempotency keys, jobs and their event log.

-- A document is stored once per tenant and content hash.
CREATE TABLE documents (
    tenant     text        NOT NULL,
    sha256     text        NOT NULL,
    media_type text        NOT NULL,
    data       bytea       NOT NULL,
    size_bytes bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, sha256)
);

-- An idempotency key binds one client intent (tenant, method, key) to the
-- fingerprint of its request and the job it created, for the key's window.
-- The janitor deletes expired keys; the jobs stay. job_id has no foreign key:
-- the key is inserted before its job in the same statement and a key never
-- outlives the need to be checked against it.
CREATE TABLE idempotency_keys (
    tenant      text        NOT NULL,
    method      text        NOT NULL,
    idem_key    text        NOT NULL,
    fingerprint text        NOT NULL,
    job_id      uuid        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, method, idem_key)
);

CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

CREATE TABLE jobs (
    id                  uuid        PRIMARY KEY,
    tenant              text        NOT NULL,
    idempotency_key     text        NOT NULL,
    dedup_key           text        NOT NULL,
    pipeline            text        NOT NULL,
    pipeline_version    integer     NOT NULL,
    prompt_version      text        NOT NULL DEFAULT '',
    model_profile       text        NOT NULL DEFAULT '',
    status              text        NOT NULL CHECK (status IN (
                            'queued', 'running', 'retry_wait', 'awaiting_approval',
                            'outcome_unknown', 'succeeded', 'failed', 'cancelled',
                            'dead_lettered')),
    stage               text        NOT NULL DEFAULT 'uploaded' CHECK (stage IN (
                            'uploaded', 'text_extracted', 'chunks_ready', 'llm_done',
                            'validated', 'published')),
    attempt             integer     NOT NULL DEFAULT 0,
    output              jsonb,
    error               jsonb,
    deduplicated_from   uuid        REFERENCES jobs (id),
    document_sha256     text        NOT NULL,
    document_media_type text        NOT NULL,
    document_name       text        NOT NULL DEFAULT '',
    document_size_bytes bigint      NOT NULL,
    params              jsonb       NOT NULL DEFAULT '{}',
    labels              jsonb       NOT NULL DEFAULT '{}',
    prompt_tokens       bigint      NOT NULL DEFAULT 0,
    completion_tokens   bigint      NOT NULL DEFAULT 0,
    cost_micros         bigint      NOT NULL DEFAULT 0,
    llm_calls           integer     NOT NULL DEFAULT 0,
    -- The seq of the job's newest event. Every transition increments it in
    -- the UPDATE that holds the row lock, so concurrent transitions never
    -- compute the same next seq.
    last_event_seq      integer     NOT NULL DEFAULT 1,
    lease_owner         text,
    lease_until         timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    FOREIGN KEY (tenant, document_sha256) REFERENCES documents (tenant, sha256)
);

CREATE INDEX jobs_tenant_created_idx ON jobs (tenant, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_status_created_idx ON jobs (tenant, status, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_pipeline_created_idx ON jobs (tenant, pipeline, created_at DESC, id DESC);
CREATE INDEX jobs_tenant_dedup_key_idx ON jobs (tenant, dedup_key);

-- At most one computed success per computation. Deduplicated jobs copy a
-- success and carry deduplicated_from, so they are not counted.
CREATE UNIQUE INDEX jobs_computed_success_key ON jobs (tenant, dedup_key)
    WHERE status = 'succeeded' AND deduplicated_from IS NULL;

-- Work waiting for a worker, for claiming.
CREATE INDEX jobs_claimable_idx ON jobs (created_at)
    WHERE status IN ('queued', 'retry_wait');

-- The durable event log of each job, read by WatchJob from a seq on.
CREATE TABLE job_events (
    job_id     uuid        NOT NULL REFERENCES jobs (id),
    seq        integer     NOT NULL,
    status     text        NOT NULL,
    stage      text        NOT NULL,
    attempt    integer     NOT NULL,
    message    text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, seq)
);
