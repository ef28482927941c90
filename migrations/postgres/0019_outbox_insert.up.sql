-- 0019_outbox_insert: jobs_announce writes its outbox event only when no
-- event of that id exists, instead of INSERT ... ON CONFLICT DO NOTHING: a
-- speculative insertion costs one more WAL record per row, on every publish
-- (docs/performance.md, "Rows and WAL per job"). The same event twice stays
-- impossible: the trigger runs on an update of the job's row, so two of them
-- for one job take turns on the row lock, and the later one's statement sees
-- the earlier one's commit (a duplicate would still meet outbox_event_id_key).
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
    WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE event_id = v_id);
    RETURN NULL;
END $$;
