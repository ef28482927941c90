-- name: JobUpdateFull :one
-- Sets a job's whole engine state for store/storetest's factory and appends
-- its event. Not for production paths: it checks no rule.
WITH job AS (
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
)
SELECT * FROM job;
