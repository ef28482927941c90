-- 0033_outbox_route_queue: what routing an event writes, cut (issue 33;
-- docs/performance.md, "Relay: a narrow routing queue (2026-12-06)";
-- docs/architecture.md, "Routing and deliveries").
--
-- The unrouted events were outbox rows with routed_at NULL, found through
-- outbox_unrouted_idx, and a routing marked each one routed by setting
-- routed_at: an update of an indexed predicate's column, never heap-only,
-- so each copied the event's row (its ~700-byte payload) into a new version
-- and wrote an entry in each of the outbox's two other indexes. They are now
-- the rows of a narrow queue, outbox_unrouted (the event's id and its job,
-- whose hash is its routing partition), written by jobs_announce in the
-- statement that writes the event, and a routing deletes its events' rows:
-- a small record each, no index entry, the outbox rows never written again.
-- The queue shows an event when its transaction commits, as the partial
-- index did: ids that commit out of order are read in the order they
-- become visible, never skipped (no high-water mark over ids).
CREATE TABLE outbox_unrouted (
    id     bigint PRIMARY KEY,
    job_id uuid   NOT NULL
);
INSERT INTO outbox_unrouted (id, job_id)
SELECT id, job_id FROM outbox WHERE routed_at IS NULL;
DROP INDEX outbox_unrouted_idx;

-- A delivery's unique key is its event's outbox row and its sink (the
-- event id, text, is as unique: one outbox row per event id): a bigint
-- instead of a ~55-byte text in the index entry, and the index finds an
-- event's deliveries (OutboxList's routed_at).
ALTER TABLE deliveries ADD CONSTRAINT deliveries_outbox_sink_key UNIQUE (outbox_id, sink);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_sink_key;

-- deliveries_job_idx served one reader, the listing of a job's deliveries
-- (DeliveryList), which finds them through the job's events instead
-- (outbox_job_event_key, then deliveries_outbox_sink_key): one index entry
-- less a delivery. The order check of routing and claims reads
-- deliveries_order_idx (pending ones only).
DROP INDEX deliveries_job_idx;

-- The foreign key of deliveries to outbox: every delivery is inserted by
-- OutboxRouteWrite, in the transaction that read its event's row (and
-- holds its partition's routing lock), and nothing deletes outbox rows. Its
-- check was a SELECT ... FOR KEY SHARE of the outbox row per delivery: a
-- row lock's WAL record and a dirtied outbox page each, the only write to
-- the outbox a routing would still make.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_outbox_id_fkey;

CREATE OR REPLACE FUNCTION jobs_announce() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text := 'job.' || NEW.status;
    v_id   text := 'job:' || NEW.id || ':' || v_type || ':' || NEW.generation;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    WITH ev AS (
        INSERT INTO outbox (event_id, tenant, job_id, pipeline, event_type, payload)
        SELECT v_id, NEW.tenant, NEW.id, NEW.pipeline, v_type, jsonb_build_object(
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
                    'llm_calls', NEW.llm_calls)))
        WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE job_id = NEW.id AND event_id = v_id)
        RETURNING id, job_id
    )
    INSERT INTO outbox_unrouted (id, job_id) SELECT id, job_id FROM ev;
    RETURN NULL;
END $$;

-- CREATE OR REPLACE resets what 0030 set: its statements planned at every
-- execution.
ALTER FUNCTION jobs_announce() SET plan_cache_mode = force_custom_plan;
