-- 0029_publish_outbox: JobPublishMany writes its jobs' job.succeeded
-- events itself, in one INSERT for the batch, instead of the jobs_announce
-- trigger writing them one row at a time (issue 33; docs/performance.md,
-- "The cost of a job"): a PL/pgSQL call and an INSERT planned and run per
-- row were most of the publishing statement's time.
--
-- The envelope (v1, docs/architecture.md, "Events") is built by one
-- function, jobs_envelope, for the trigger and the statements that write
-- their events themselves; a plain SQL function, the planner inlines it.
CREATE FUNCTION jobs_envelope(j jobs, v_type text, v_id text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
SELECT jsonb_build_object(
    'version', 1,
    'type', v_type,
    'id', v_id,
    'time', to_char(j.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    'data', jsonb_build_object(
        'job_id', j.id,
        'tenant', j.tenant,
        'pipeline', j.pipeline,
        'pipeline_version', j.pipeline_version,
        'prompt_version', j.prompt_version,
        'model_profile', j.model_profile,
        'dedup_key', j.dedup_key,
        'deduplicated_from', j.deduplicated_from,
        'generation', j.generation,
        'status', j.status,
        'stage', j.stage,
        'attempt', j.attempt,
        'output', CASE WHEN j.status = 'succeeded' THEN j.output END,
        'error', j.error,
        'usage', jsonb_build_object(
            'prompt_tokens', j.prompt_tokens,
            'completion_tokens', j.completion_tokens,
            'cost_micros', j.cost_micros,
            'llm_calls', j.llm_calls)))
$$;

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
    SELECT v_id, NEW.tenant, NEW.id, NEW.pipeline, v_type, jobs_envelope(NEW, v_type, v_id)
    WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE job_id = NEW.id AND event_id = v_id);
    RETURN NULL;
END $$;

-- An insert into an announced status (a deduplicated submission is born
-- succeeded) still announces through the trigger, and so does every update
-- into one but succeeded: a statement that sets succeeded writes the event
-- itself (JobPublishMany; store/storetest's factory, JobUpdateFull).
-- TestSucceededWritesItsEvent (store/storepg) holds every statement of the
-- store that updates a job's status to that rule.
DROP TRIGGER jobs_announce ON jobs;
CREATE TRIGGER jobs_announce
    AFTER INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'dead_lettered', 'cancelled',
        'awaiting_approval', 'outcome_unknown'))
    EXECUTE FUNCTION jobs_announce();
CREATE TRIGGER jobs_announce_update
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('failed', 'dead_lettered', 'cancelled',
        'awaiting_approval', 'outcome_unknown'))
    EXECUTE FUNCTION jobs_announce();
