-- 0008_effects: the SQLite twin of postgres/0008_effects.up.sql: announced
-- events, deliveries, the delivery journal, disabled sinks, sent messages.
-- Timestamps are integer unix microseconds supplied by the store; in the
-- triggers they are the job's updated_at, which the store just set.

ALTER TABLE jobs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

DROP INDEX outbox_unpublished_idx;
ALTER TABLE outbox RENAME COLUMN published_at TO routed_at;
ALTER TABLE outbox DROP COLUMN attempts;
ALTER TABLE outbox DROP COLUMN last_error;
ALTER TABLE outbox ADD COLUMN pipeline TEXT NOT NULL DEFAULT '';
CREATE INDEX outbox_unrouted_idx ON outbox (id) WHERE routed_at IS NULL;

-- A replay (FAILED or DEAD_LETTERED back to QUEUED) starts a new generation.
CREATE TRIGGER jobs_next_generation
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN OLD.status IN ('failed', 'dead_lettered') AND NEW.status = 'queued'
BEGIN
    UPDATE jobs SET generation = OLD.generation + 1 WHERE id = NEW.id;
END;

-- Every move into an announced status writes its outbox event in the same
-- transaction (envelope v1; the same fields and formats as Postgres's).
CREATE TRIGGER jobs_announce_insert
    AFTER INSERT ON jobs
    FOR EACH ROW
    WHEN NEW.status IN ('succeeded', 'failed', 'dead_lettered', 'cancelled',
        'awaiting_approval', 'outcome_unknown')
BEGIN
    INSERT OR IGNORE INTO outbox (event_id, tenant, job_id, pipeline, event_type, payload, created_at)
    SELECT e.event_id, NEW.tenant, NEW.id, NEW.pipeline, e.event_type, json_object(
        'version', 1,
        'type', e.event_type,
        'id', e.event_id,
        'time', strftime('%Y-%m-%dT%H:%M:%S', NEW.updated_at / 1000000, 'unixepoch')
            || printf('.%06dZ', NEW.updated_at % 1000000),
        'data', json_object(
            'job_id', NEW.id,
            'tenant', NEW.tenant,
            'pipeline', NEW.pipeline,
            'pipeline_version', NEW.pipeline_version,
            'prompt_version', NEW.prompt_version,
            'model_profile', NEW.model_profile,
            'dedup_key', NEW.dedup_key,
            'deduplicated_from', NEW.deduplicated_from,
            'generation', NEW.generation,
            'status', NEW.status,
            'stage', NEW.stage,
            'attempt', NEW.attempt,
            'output', CASE WHEN NEW.status = 'succeeded' THEN json(NEW.output) END,
            'error', json(NEW.error),
            'usage', json_object(
                'prompt_tokens', NEW.prompt_tokens,
                'completion_tokens', NEW.completion_tokens,
                'cost_micros', NEW.cost_micros,
                'llm_calls', NEW.llm_calls))), NEW.updated_at
    FROM (SELECT 'job:' || NEW.id || ':job.' || NEW.status || ':' || NEW.generation AS event_id,
        'job.' || NEW.status AS event_type) AS e;
END;

CREATE TRIGGER jobs_announce_update
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN OLD.status <> NEW.status AND NEW.status IN ('succeeded', 'failed', 'dead_lettered',
        'cancelled', 'awaiting_approval', 'outcome_unknown')
BEGIN
    INSERT OR IGNORE INTO outbox (event_id, tenant, job_id, pipeline, event_type, payload, created_at)
    SELECT e.event_id, NEW.tenant, NEW.id, NEW.pipeline, e.event_type, json_object(
        'version', 1,
        'type', e.event_type,
        'id', e.event_id,
        'time', strftime('%Y-%m-%dT%H:%M:%S', NEW.updated_at / 1000000, 'unixepoch')
            || printf('.%06dZ', NEW.updated_at % 1000000),
        'data', json_object(
            'job_id', NEW.id,
            'tenant', NEW.tenant,
            'pipeline', NEW.pipeline,
            'pipeline_version', NEW.pipeline_version,
            'prompt_version', NEW.prompt_version,
            'model_profile', NEW.model_profile,
            'dedup_key', NEW.dedup_key,
            'deduplicated_from', NEW.deduplicated_from,
            'generation', NEW.generation,
            'status', NEW.status,
            'stage', NEW.stage,
            'attempt', NEW.attempt,
            'output', CASE WHEN NEW.status = 'succeeded' THEN json(NEW.output) END,
            'error', json(NEW.error),
            'usage', json_object(
                'prompt_tokens', NEW.prompt_tokens,
                'completion_tokens', NEW.completion_tokens,
                'cost_micros', NEW.cost_micros,
                'llm_calls', NEW.llm_calls))), NEW.updated_at
    FROM (SELECT 'job:' || NEW.id || ':job.' || NEW.status || ':' || NEW.generation AS event_id,
        'job.' || NEW.status AS event_type) AS e;
END;

CREATE TABLE deliveries (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    outbox_id         INTEGER NOT NULL REFERENCES outbox (id),
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL,
    sink              TEXT    NOT NULL,
    tenant            TEXT    NOT NULL,
    job_id            TEXT    NOT NULL,
    status            TEXT    NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'delivered', 'dead_lettered')),
    attempt           INTEGER NOT NULL DEFAULT 0,
    attempts          INTEGER NOT NULL DEFAULT 0,
    due_at            INTEGER NOT NULL,
    lease_owner       TEXT,
    last_outcome      TEXT    NOT NULL DEFAULT '',
    last_error        TEXT    NOT NULL DEFAULT '',
    external_ref      TEXT    NOT NULL DEFAULT '',
    budget_started_at INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    delivered_at      INTEGER,
    UNIQUE (event_id, sink)
) STRICT;

CREATE INDEX deliveries_due_idx ON deliveries (due_at) WHERE status = 'pending';
CREATE INDEX deliveries_order_idx ON deliveries (job_id, sink, outbox_id) WHERE status = 'pending';
CREATE INDEX deliveries_tenant_status_idx ON deliveries (tenant, status, id);
CREATE INDEX deliveries_job_idx ON deliveries (job_id, id);
-- Settled deliveries of a sink (the reconciler's JetStream check). Partial,
-- so that the planner never takes it for the per-job order lookup of a claim
-- (before the table's first ANALYZE it would, and scan every pending
-- delivery of the sink for each candidate).
CREATE INDEX deliveries_sink_idx ON deliveries (sink, status, id) WHERE status <> 'pending';

CREATE TABLE delivery_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  INTEGER NOT NULL REFERENCES deliveries (id),
    event_id     TEXT    NOT NULL,
    sink         TEXT    NOT NULL,
    tenant       TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    relay        TEXT    NOT NULL,
    outcome      TEXT    NOT NULL CHECK (outcome IN ('delivered', 'failed', 'unknown', 'dead_lettered', 'sink_disabled')),
    http_status  INTEGER NOT NULL DEFAULT 0,
    error        TEXT    NOT NULL DEFAULT '',
    external_ref TEXT    NOT NULL DEFAULT '',
    duplicate    INTEGER NOT NULL DEFAULT 0 CHECK (duplicate IN (0, 1)),
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    latency_ms   INTEGER NOT NULL
) STRICT;

CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, id);

CREATE TABLE sink_states (
    sink        TEXT    PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    disabled_at INTEGER NOT NULL,
    reason      TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE sent_messages (
    sink         TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    external_ref TEXT    NOT NULL DEFAULT '',
    sent_at      INTEGER NOT NULL,
    PRIMARY KEY (sink, content_hash)
) STRICT;
