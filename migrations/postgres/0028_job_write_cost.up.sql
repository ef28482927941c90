-- 0028_job_write_cost: what a light job writes, cut where the guarantee
-- holds without it (issue 33; docs/performance.md, "The cost of a job";
-- docs/architecture.md, "Schema trades").
--
-- The foreign keys of llm_attempts, job_checkpoints and outbox to jobs:
-- every row of the three is inserted by a statement that reads or updates
-- its job's row in the same statement (CheckpointWriteMany,
-- LLMAttemptRecord, JobPublishMany, the jobs_announce trigger), and nothing
-- deletes jobs. Each check was a SELECT ... FOR KEY SHARE of the job's row
-- per inserted row, planned at every execution under force_custom_plan,
-- and a WAL record for the row lock: three a light job.
ALTER TABLE llm_attempts DROP CONSTRAINT llm_attempts_job_id_fkey;
ALTER TABLE job_checkpoints DROP CONSTRAINT job_checkpoints_job_id_fkey;
ALTER TABLE outbox DROP CONSTRAINT outbox_job_id_fkey;

-- llm_attempts is read by job only (LLMAttemptList, the billed-once check,
-- the provider batches' bills): its primary key becomes (job_id, id), which
-- llm_attempts_job_idx was, and the index on id alone, read by nothing,
-- goes. One index entry less a journal row.
ALTER TABLE llm_attempts DROP CONSTRAINT llm_attempts_pkey;
ALTER TABLE llm_attempts ADD CONSTRAINT llm_attempts_pkey PRIMARY KEY (job_id, id);
DROP INDEX llm_attempts_job_idx;

-- outbox: an event id is 'job:<job id>:<type>:<generation>', so (job_id,
-- event_id) is unique exactly when event_id is. One unique index on the
-- pair serves what outbox_event_id_key (the announcing trigger's check for
-- the event) and outbox_job_idx (OutboxList, a job's few events) served:
-- one index entry less an event. outbox_pkey stays: deliveries reference
-- it, and the relay marks events routed by id.
ALTER TABLE outbox DROP CONSTRAINT outbox_event_id_key;
DROP INDEX outbox_job_idx;
ALTER TABLE outbox ADD CONSTRAINT outbox_job_event_key UNIQUE (job_id, event_id);

-- The trigger's check for its event goes through the new index.
CREATE OR REPLACE FUNCTION jobs_announce() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text := 'job.' || NEW.status;
    v_id   text := 'job:' || NEW.id || ':' || v_type || ':' || NEW.generation;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
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
    WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE job_id = NEW.id AND event_id = v_id);
    RETURN NULL;
END $$;
