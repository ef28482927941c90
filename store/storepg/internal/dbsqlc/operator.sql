-- name: IdempotencyKeyInsert :one
-- Takes a key for an operator call. On a conflict with a key another
-- transaction is inserting, it waits for that transaction: if it commits,
-- nothing is inserted and no row is returned; if it rolls back, this insert
-- goes ahead.
INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id)
VALUES (@tenant::text, @method::text, @idem_key::text, @fingerprint::text, @job_id::uuid)
ON CONFLICT DO NOTHING
RETURNING job_id;

-- name: IdempotencyKeyGet :one
-- Reads an existing key. Run as its own statement after IdempotencyKeyInsert
-- returned nothing, so its snapshot sees the committed winner.
SELECT fingerprint, job_id
FROM idempotency_keys
WHERE tenant = @tenant::text
    AND method = @method::text
    AND idem_key = @idem_key::text;

-- name: JobGetByIDForUpdate :one
-- Locks a job to tell why a conditional transition matched no row: no such
-- job, or a status the transition may not start from.
SELECT * FROM jobs
WHERE tenant = @tenant::text AND id = @id::uuid
FOR UPDATE;

-- name: JobCancel :one
-- Cancels a job no worker holds at once, with its event. A running job only
-- gets cancel_requested: that is no status transition, so no event; its
-- worker learns it at its next heartbeat and settles the job cancelled.
WITH job AS (
    UPDATE jobs
    SET status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
        cancel_requested = cancel_requested OR status = 'running',
        finished_at = CASE WHEN status = 'running' THEN finished_at ELSE now() END,
        run_after = CASE WHEN status = 'running' THEN run_after END,
        lease_owner = CASE WHEN status = 'running' THEN lease_owner END,
        lease_until = CASE WHEN status = 'running' THEN lease_until END,
        last_event_seq = last_event_seq + CASE WHEN status = 'running' THEN 0 ELSE 1 END,
        updated_at = now()
    WHERE tenant = @tenant::text
        AND id = @id::uuid
        AND status = ANY(@from_statuses::text[])
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text
    FROM job
    WHERE job.status = 'cancelled'
)
SELECT * FROM job;

-- name: JobReplay :one
-- Queues a finished job again with a fresh budget and its error cleared. The
-- checkpoints of @reset_stages are deleted so those stages run again; a job
-- whose stage is among them goes back to @reset_stage. An approval stands
-- only while no stage runs again: a recomputed plan is reviewed anew. The
-- attempt is kept: it is the fencing token and only ever grows.
WITH job AS (
    UPDATE jobs
    SET status = 'queued',
        stage = CASE WHEN stage = ANY(@reset_stages::text[]) THEN @reset_stage::text ELSE stage END,
        error = NULL,
        finished_at = NULL,
        run_after = NULL,
        cancel_requested = false,
        lease_owner = NULL,
        lease_until = NULL,
        approved = approved AND cardinality(@reset_stages::text[]) = 0,
        budget_started_at = now(),
        budget_attempts = 0,
        budget_tokens = 0,
        last_event_seq = last_event_seq + 1,
        updated_at = now()
    WHERE tenant = @tenant::text
        AND id = @id::uuid
        AND status = ANY(@from_statuses::text[])
    RETURNING *
),
checkpoints AS (
    DELETE FROM job_checkpoints
    USING job
    WHERE job_checkpoints.job_id = job.id
        AND job_checkpoints.stage = ANY(@reset_stages::text[])
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text
    FROM job
)
SELECT * FROM job;

-- name: JobSettle :one
-- Moves a job no worker holds to @status, with its event: ResolveJob
-- (outcome_unknown to queued or failed) and ApproveJob (awaiting_approval to
-- queued, approved, or cancelled). A NULL error keeps the job's last one.
-- @fresh_budget starts the retry budget again (a retry by hand).
WITH job AS (
    UPDATE jobs
    SET status = @status::text,
        error = coalesce(sqlc.narg(error)::jsonb, error),
        approved = approved OR @approved::boolean,
        budget_started_at = CASE WHEN @fresh_budget::boolean THEN now() ELSE budget_started_at END,
        budget_attempts = CASE WHEN @fresh_budget::boolean THEN 0 ELSE budget_attempts END,
        budget_tokens = CASE WHEN @fresh_budget::boolean THEN 0 ELSE budget_tokens END,
        finished_at = CASE WHEN @finished::boolean THEN now() END,
        run_after = NULL,
        lease_owner = NULL,
        lease_until = NULL,
        last_event_seq = last_event_seq + 1,
        updated_at = now()
    WHERE tenant = @tenant::text
        AND id = @id::uuid
        AND status = ANY(@from_statuses::text[])
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text
    FROM job
)
SELECT * FROM job;
