-- The operators' transitions (CancelJob, ReplayJob, ResolveJob, ApproveJob).
-- Each is a conditional UPDATE on the statuses it may start from, run in one
-- write transaction after the idempotency key's insert (IdempotencyKeyInsert)
-- and before its event (JobEventAppend). Writes take turns on the single
-- writer, so what an UPDATE matched holds until the transaction commits.
--
-- A list (statuses, stages) is one parameter, a JSON array read with
-- json_each, not sqlc.slice: sqlc numbers a slice as one parameter, so the
-- numbered parameters after it would bind the wrong values once it expands
-- to several, and the statement's text stays the same for every list.

-- name: IdempotencyKeyGet :one
-- Reads an existing key, after IdempotencyKeyInsert inserted nothing.
SELECT fingerprint, job_id
FROM idempotency_keys
WHERE tenant = @tenant
    AND method = @method
    AND idem_key = @idem_key;

-- name: JobCancel :one
-- Cancels a job no worker holds at once. A running job only gets
-- cancel_requested: that is no status transition, so no event (the caller
-- appends one only for a cancelled job); its worker learns it at its next
-- heartbeat and settles the job cancelled. Every SET term reads the row as
-- it was, as in Postgres.
UPDATE jobs
SET status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
    cancel_requested = cancel_requested OR status = 'running',
    finished_at = CASE WHEN status = 'running' THEN finished_at ELSE @now END,
    run_after = CASE WHEN status = 'running' THEN run_after END,
    lease_owner = CASE WHEN status = 'running' THEN lease_owner END,
    lease_until = CASE WHEN status = 'running' THEN lease_until END,
    last_event_seq = last_event_seq + CASE WHEN status = 'running' THEN 0 ELSE 1 END,
    updated_at = @now
WHERE tenant = @tenant
    AND id = @id
    AND status IN (SELECT value FROM json_each(CAST(@from_statuses AS TEXT)))
RETURNING *;

-- name: JobReplay :one
-- Queues a finished job again with a fresh budget and its error cleared. A
-- job whose stage is among @reset_stages goes back to @reset_stage (the
-- caller deletes those stages' checkpoints, CheckpointDeleteStages). An
-- approval stands only while no stage runs again: @clear_approval is set
-- with a FromStage, and a recomputed plan is reviewed anew. The attempt is
-- kept: it is the fencing token and only ever grows.
UPDATE jobs
SET status = 'queued',
    stage = CASE WHEN stage IN (SELECT value FROM json_each(CAST(@reset_stages AS TEXT))) THEN @reset_stage ELSE stage END,
    error = NULL,
    finished_at = NULL,
    run_after = NULL,
    cancel_requested = 0,
    lease_owner = NULL,
    lease_until = NULL,
    approved = approved AND NOT CAST(@clear_approval AS BOOLEAN),
    budget_started_at = @now,
    budget_attempts = 0,
    budget_tokens = 0,
    last_event_seq = last_event_seq + 1,
    updated_at = @now
WHERE tenant = @tenant
    AND id = @id
    AND status IN (SELECT value FROM json_each(CAST(@from_statuses AS TEXT)))
RETURNING *;

-- name: CheckpointDeleteStages :exec
-- Deletes a job's checkpoints of @stages, in the transaction of its replay.
DELETE FROM job_checkpoints
WHERE job_id = @job_id
    AND stage IN (SELECT value FROM json_each(CAST(@stages AS TEXT)));

-- name: JobSettle :one
-- Moves a job no worker holds to @status: ResolveJob (outcome_unknown to
-- queued or failed) and ApproveJob (awaiting_approval to queued, approved,
-- or cancelled). A NULL error keeps the job's last one; @finished_at is NULL
-- unless @status is final. @fresh_budget starts the retry budget again (a
-- retry by hand).
UPDATE jobs
SET status = @status,
    error = coalesce(sqlc.narg(error), error),
    approved = approved OR CAST(@approved AS BOOLEAN),
    budget_started_at = CASE WHEN CAST(@fresh_budget AS BOOLEAN) = 1 THEN @now ELSE budget_started_at END,
    budget_attempts = CASE WHEN CAST(@fresh_budget AS BOOLEAN) = 1 THEN 0 ELSE budget_attempts END,
    budget_tokens = CASE WHEN CAST(@fresh_budget AS BOOLEAN) = 1 THEN 0 ELSE budget_tokens END,
    finished_at = sqlc.narg(finished_at),
    run_after = NULL,
    lease_owner = NULL,
    lease_until = NULL,
    last_event_seq = last_event_seq + 1,
    updated_at = @now
WHERE tenant = @tenant
    AND id = @id
    AND status IN (SELECT value FROM json_each(CAST(@from_statuses AS TEXT)))
RETURNING *;
