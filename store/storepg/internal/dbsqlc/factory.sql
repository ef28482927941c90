-- name: JobUpdateFull :one
-- Sets a job's whole engine state for store/storetest's factory and appends
-- its event, and its outbox event when it becomes succeeded (the trigger
-- announces every other status; migration 0029). Not for production paths:
-- it checks no rule.
WITH old AS (
    SELECT status FROM jobs WHERE tenant = @tenant::text AND id = @id::uuid
),
job AS (
    UPDATE jobs
    SET status = @status::text,
        stage = @stage::text,
        attempt = @attempt::integer,
        lease_owner = sqlc.narg(lease_owner)::text,
        lease_until = sqlc.narg(lease_until)::timestamptz,
        run_after = sqlc.narg(run_after)::timestamptz,
        output = sqlc.narg(output)::jsonb,
        error = sqlc.narg(error)::jsonb,
        cancel_requested = @cancel_requested::boolean,
        approved = @approved::boolean,
        finished_at = sqlc.narg(finished_at)::timestamptz,
        last_event_seq = last_event_seq + 1,
        updated_at = now()
    WHERE tenant = @tenant::text AND id = @id::uuid
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text
    FROM job
),
announced AS (
    INSERT INTO outbox (event_id, tenant, job_id, pipeline, event_type, payload)
    SELECT e.id, job.tenant, job.id, job.pipeline, 'job.succeeded', jobs_envelope(job::jobs, 'job.succeeded', e.id)
    FROM job
    JOIN old ON old.status <> 'succeeded'
    CROSS JOIN LATERAL (SELECT 'job:' || job.id::text || ':job.succeeded:' || job.generation::text AS id) AS e
    WHERE job.status = 'succeeded'
        AND NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.job_id = job.id AND outbox.event_id = e.id)
)
SELECT * FROM job;
