-- name: JobUpdateFull :one
-- Sets a job's whole engine state for store/storetest's factory. The caller
-- appends the event (JobEventAppend). Not for production paths: it checks
-- no rule.
UPDATE jobs
SET status = @status,
    stage = @stage,
    attempt = @attempt,
    lease_owner = sqlc.narg(lease_owner),
    lease_until = sqlc.narg(lease_until),
    run_after = sqlc.narg(run_after),
    output = sqlc.narg(output),
    error = sqlc.narg(error),
    cancel_requested = @cancel_requested,
    approved = @approved,
    finished_at = sqlc.narg(finished_at),
    last_event_seq = last_event_seq + 1,
    updated_at = @now
WHERE tenant = @tenant AND id = @id
RETURNING *;
