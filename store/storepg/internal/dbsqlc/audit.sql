-- name: JobEventSetActor :exec
-- Names the caller of an operator RPC on the event its transition just
-- appended, in the transition's transaction.
UPDATE job_events
SET actor_key = @actor_key::text, actor_role = @actor_role::text, actor_rpc = @actor_rpc::text
WHERE job_id = @job_id::uuid AND seq = @seq::integer;

-- name: JobEventAppendAudit :one
-- Appends an event that records an operator's request without a status
-- change (a cancel asked of a running job), with its caller, in the
-- request's transaction; the job keeps its status.
WITH job AS (
    UPDATE jobs
    SET last_event_seq = last_event_seq + 1, updated_at = now()
    WHERE id = @job_id::uuid
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message, actor_key, actor_role, actor_rpc)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text,
        @actor_key::text, @actor_role::text, @actor_rpc::text
    FROM job
)
SELECT * FROM job;

-- name: TenantUsage :one
-- What a tenant's limits are checked against: its jobs not yet finished, and
-- the document bytes of the jobs it created since since.
SELECT
    (SELECT count(*) FROM jobs AS j
     WHERE j.tenant = @tenant::text
        AND j.status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown'))::bigint AS in_flight,
    (SELECT coalesce(sum(j.document_size_bytes), 0) FROM jobs AS j
     WHERE j.tenant = @tenant::text AND j.created_at >= @since::timestamptz)::bigint AS document_bytes;
