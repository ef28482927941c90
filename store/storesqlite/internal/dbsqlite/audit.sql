-- name: JobEventSetActor :exec
-- Names the caller of an operator RPC on the event its transition just
-- appended, in the transition's transaction.
UPDATE job_events
SET actor_key = @actor_key, actor_role = @actor_role, actor_rpc = @actor_rpc
WHERE job_id = @job_id AND seq = @seq;

-- name: JobEventSeqBump :one
-- Makes room for an event that records an operator's request without a
-- status change (a cancel asked of a running job); JobEventAppend then
-- writes it and JobEventSetActor names its caller.
UPDATE jobs
SET last_event_seq = last_event_seq + 1, updated_at = @now
WHERE id = @job_id
RETURNING last_event_seq;

-- name: TenantUsage :one
-- What a tenant's limits are checked against: its jobs not yet finished, and
-- the document bytes of the jobs it created since since.
SELECT
    (SELECT count(*) FROM jobs AS j
     WHERE j.tenant = @tenant
        AND j.status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown')) AS in_flight,
    CAST((SELECT coalesce(sum(j.document_size_bytes), 0) FROM jobs AS j
     WHERE j.tenant = @tenant AND j.created_at >= @since) AS INTEGER) AS document_bytes;
