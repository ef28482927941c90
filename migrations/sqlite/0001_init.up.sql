-- 0001_init: documents, idempotency keys, jobs and their event log.
--
-- The SQLite twin of postgres/0001_init.up.sql: the same tables, columns,
-- keys and indexes. Only the types differ. Ids are uuids as canonical
-- lowercase text; JSON is text that json_valid accepts; timestamps are
-- integer unix microseconds (UTC), which sort like the times they stand for
-- and round-trip exactly. The store supplies every timestamp.

-- A document is stored once per tenant and content hash.
CREATE TABLE documents (
    tenant     TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    media_type TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    size_bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, sha256)
) STRICT;

-- An idempotency key binds one client intent (tenant, method, key) to the
-- fingerprint of its request and the job it created, for the key's window.
-- The janitor deletes expired keys; the jobs stay. job_id has no foreign key:
-- the key is inserted before its job in the same transaction and a key never
-- outlives the need to be checked against it.
CREATE TABLE idempotency_keys (
    tenant      TEXT    NOT NULL,
    method      TEXT    NOT NULL,
    idem_key    TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    job_id      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, method, idem_key)
) STRICT;

CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

CREATE TABLE jobs (
    id                  TEXT    PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    idempotency_key     TEXT    NOT NULL,
    dedup_key           TEXT    NOT NULL,
    pipeline            TEXT    NOT NULL,
    pipeline_version    INTEGER NOT NULL,
    prompt_version      TEXT    NOT NULL DEFAULT '',
    model_profile       TEXT    NOT NULL DEFAULT '',
    status              TEXT    NOT NULL CHECK (status IN (
                            'queued', 'running', 'retry_wait', 'awaiting_approval',
                            'outcome_unknown', 'succeeded', 'failed', 'cancelled',
                            'dead_lettered')),
    stage               TEXT    NOT NULL DEFAULT 'uploaded' CHECK (stage IN (
                            'uploaded', 'text_extracted', 'chunks_ready', 'llm_done',
                            'validated', 'published')),
    attempt             INTEGER NOT NULL DEFAULT 0,
    output              TEXT    CHECK (json_valid(output)),
    error               TEXT    CHECK (json_valid(error)),
    deduplicated_from   TEXT    REFERENCES jobs (id),
    document_sha256     TEXT    NOT NULL,
    document_media_type TEXT    NOT NULL,
    document_name       TEXT    NOT NULL DEFAULT '',
    document_size_bytes INTEGER NOT NULL,
    params              TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(params)),
    labels              TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    prompt_tokens       INTEGER NOT NULL DEFAULT 0,
    completion_tokens   INTEGER NOT NULL DEFAULT 0,
    cost_micros         INTEGER NOT NULL DEFAULT 0,
    llm_calls           INTEGER NOT NULL DEFAULT 0,
    -- The seq of the job's newest event. Every transition increments it in
    -- the write transaction that appends that event.
    last_event_seq      INTEGER NOT NULL DEFAULT 1,
    lease_owner         TEXT,
    lease_until         INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    finished_at         INTEGER,
    FOREIGN KEY (tenant, document_sha256) REFERENCES documents (tenant, sha256)
) STRICT;

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
    job_id     TEXT    NOT NULL REFERENCES jobs (id),
    seq        INTEGER NOT NULL,
    status     TEXT    NOT NULL,
    stage      TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    message    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, seq)
) STRICT, WITHOUT ROWID;
