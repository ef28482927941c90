-- 0008_effects: the events a job announces, their deliveries to sinks, the
-- delivery journal, disabled sinks and the chat sink's sent messages. See
-- docs/architecture.md, "Effects".

-- generation: how many times ReplayJob sent the job around again. It is part
-- of every event id, so a replayed job that finishes again announces again,
-- while a redelivery of one announcement never gets a new id.
ALTER TABLE jobs ADD COLUMN generation integer NOT NULL DEFAULT 0;

-- The outbox is routed (one delivery per subscribed sink) by a relay, not
-- published by itself: published_at becomes routed_at, and the per-event
-- retry columns give way to per-delivery ones.
ALTER TABLE outbox RENAME COLUMN published_at TO routed_at;
ALTER TABLE outbox DROP COLUMN attempts, DROP COLUMN last_error;
ALTER TABLE outbox ADD COLUMN pipeline text NOT NULL DEFAULT '';
DROP INDEX outbox_unpublished_idx;
CREATE INDEX outbox_unrouted_idx ON outbox (id) WHERE routed_at IS NULL;

-- A replay (FAILED or DEAD_LETTERED back to QUEUED; nothing else makes that
-- move) starts a new generation.
CREATE FUNCTION jobs_next_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.generation := OLD.generation + 1;
    RETURN NEW;
END $$;

CREATE TRIGGER jobs_next_generation
    BEFORE UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (OLD.status IN ('failed', 'dead_lettered') AND NEW.status = 'queued')
    EXECUTE FUNCTION jobs_next_generation();

-- Every move into an announced status writes its outbox event in the same
-- transaction, whichever statement made the move (publish, a worker's
-- transition, an operator's, a deduplicated submit), so no code path can
-- forget one. The payload is envelope v1 (docs/architecture.md, "Events"),
-- fixed here: every delivery sends these bytes.
CREATE FUNCTION jobs_announce() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text := 'job.' || NEW.status;
    v_id   text := 'job:' || NEW.id || ':' || v_type || ':' || NEW.generation;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (event_id, tenant, job_id, pipeline, event_type, payload)
    VALUES (v_id, NEW.tenant, NEW.id, NEW.pipeline, v_type, jsonb_build_object(
        'version', 1,
        'type', v_type,
        'id', v_id,
        'time', to_char(NEW.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'data', jsonb_build_object(
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
            'output', CASE WHEN NEW.status = 'succeeded' THEN NEW.output END,
            'error', NEW.error,
            'usage', jsonb_build_object(
                'prompt_tokens', NEW.prompt_tokens,
                'completion_tokens', NEW.completion_tokens,
                'cost_micros', NEW.cost_micros,
                'llm_calls', NEW.llm_calls))))
    ON CONFLICT (event_id) DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_announce
    AFTER INSERT OR UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'dead_lettered', 'cancelled',
        'awaiting_approval', 'outcome_unknown'))
    EXECUTE FUNCTION jobs_announce();

-- One delivery per (event, sink). A relay claims due ones under a lease:
-- lease_owner set and due_at moved to the lease's end, attempt + 1 (the
-- fencing token), exactly like a worker claims jobs.
CREATE TABLE deliveries (
    id           bigserial   PRIMARY KEY,
    outbox_id    bigint      NOT NULL REFERENCES outbox (id),
    event_id     text        NOT NULL,
    event_type   text        NOT NULL,
    sink         text        NOT NULL,
    tenant       text        NOT NULL,
    job_id       uuid        NOT NULL,
    status       text        NOT NULL DEFAULT 'pending'
                             CHECK (status IN ('pending', 'delivered', 'dead_lettered')),
    attempt      integer     NOT NULL DEFAULT 0,
    -- attempts counts toward the retry budget; RetryDelivery resets it.
    attempts     integer     NOT NULL DEFAULT 0,
    due_at       timestamptz NOT NULL DEFAULT now(),
    lease_owner  text,
    last_outcome text        NOT NULL DEFAULT '',
    last_error   text        NOT NULL DEFAULT '',
    external_ref text        NOT NULL DEFAULT '',
    budget_started_at timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    UNIQUE (event_id, sink)
);

-- Claims walk pending deliveries in due order.
CREATE INDEX deliveries_due_idx ON deliveries (due_at) WHERE status = 'pending';
-- Per (job, sink), a delivery waits for every earlier pending one.
CREATE INDEX deliveries_order_idx ON deliveries (job_id, sink, outbox_id) WHERE status = 'pending';
CREATE INDEX deliveries_tenant_status_idx ON deliveries (tenant, status, id);
CREATE INDEX deliveries_job_idx ON deliveries (job_id, id);
-- Settled deliveries of a sink (the reconciler's JetStream check). Partial,
-- so that the planner never takes it for the per-job order lookup of a claim
-- (before the table's first ANALYZE it would, and scan every pending
-- delivery of the sink for each candidate).
CREATE INDEX deliveries_sink_idx ON deliveries (sink, status, id) WHERE status <> 'pending';

-- The delivery journal: every attempt, whoever made it (a relay whose lease
-- was taken over still journals what it did: an attempt that happened is a
-- fact), with the sink's external reference: the proof the effect landed.
CREATE TABLE delivery_attempts (
    id           bigserial   PRIMARY KEY,
    delivery_id  bigint      NOT NULL REFERENCES deliveries (id),
    event_id     text        NOT NULL,
    sink         text        NOT NULL,
    tenant       text        NOT NULL,
    attempt      integer     NOT NULL,
    relay        text        NOT NULL,
    outcome      text        NOT NULL CHECK (outcome IN ('delivered', 'failed', 'unknown', 'dead_lettered', 'sink_disabled')),
    http_status  integer     NOT NULL DEFAULT 0,
    error        text        NOT NULL DEFAULT '',
    external_ref text        NOT NULL DEFAULT '',
    duplicate    boolean     NOT NULL DEFAULT false,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    latency_ms   bigint      NOT NULL
);

CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, id);

-- A sink the receiver retired (HTTP 410): its deliveries wait, unclaimed,
-- until RetryDelivery of the sink enables it again.
CREATE TABLE sink_states (
    sink        text        PRIMARY KEY,
    tenant      text        NOT NULL,
    disabled_at timestamptz NOT NULL DEFAULT now(),
    reason      text        NOT NULL DEFAULT ''
);

-- The chat sink's check-then-act journal: a message with this content hash
-- was posted to this sink, with the reference the chat returned.
CREATE TABLE sent_messages (
    sink         text        NOT NULL,
    content_hash text        NOT NULL,
    event_id     text        NOT NULL,
    external_ref text        NOT NULL DEFAULT '',
    sent_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sink, content_hash)
);
