-- name: JobCountByStatus :many
-- The tenant's jobs per status, from jobs_tenant_status_created_idx (or the
-- pipeline index when filtered).
SELECT status, count(*) AS count
FROM jobs
WHERE tenant = @tenant::text
    AND (sqlc.narg(pipeline)::text IS NULL OR pipeline = sqlc.narg(pipeline)::text)
GROUP BY status;

-- name: JobStatsActive :many
-- The unfinished jobs by status and pipeline, from the partial index
-- jobs_active_status_pipeline_idx (an index-only scan).
SELECT status, pipeline, count(*)::bigint AS jobs
FROM jobs
WHERE status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown')
GROUP BY status, pipeline;

-- name: JobStatsClaimable :one
-- The claimable queue: how many jobs a claim could take now, and since when
-- the oldest has waited. Both walk jobs_claimable_idx: the expression and
-- the status terms must stay identical to JobClaim's.
-- With none claimable, oldest is the epoch.
SELECT count(*)::bigint AS claimable,
    coalesce(min(CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END), 'epoch')::timestamptz AS oldest
FROM jobs
WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown')
    AND (CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END) <= now();

-- name: OutboxStatsPending :many
-- Deliveries not yet landed, by sink, and when the oldest was routed: a
-- walk of deliveries_due_idx, the pending ones alone.
SELECT sink, count(*)::bigint AS deliveries, min(created_at)::timestamptz AS oldest
FROM deliveries
WHERE status = 'pending'
GROUP BY sink;

-- name: OutboxStatsUnrouted :one
-- Events no relay has routed yet (none runs, or it falls behind), and the
-- oldest one's commit (the epoch when there is none): the routing queue
-- outbox_unrouted, with each event's row.
SELECT count(*)::bigint AS events, coalesce(min(o.created_at), 'epoch')::timestamptz AS oldest
FROM outbox_unrouted u
    JOIN outbox o ON o.id = u.id;
