-- name: JobCountByStatus :many
-- The tenant's jobs per status, from jobs_tenant_status_created_idx alone
-- (a covering index scan: no table row is read).
SELECT status, count(*) AS count
FROM jobs
WHERE tenant = @tenant
GROUP BY status;

-- name: JobCountByStatusPipeline :many
-- The tenant's jobs of one pipeline per status: the same index, each
-- entry's row read for its pipeline.
SELECT status, count(*) AS count
FROM jobs
WHERE tenant = @tenant AND pipeline = @pipeline
GROUP BY status;

-- name: JobStatsActive :many
-- The unfinished jobs by status and pipeline, from the partial index
-- jobs_active_status_pipeline_idx (a covering index scan).
SELECT status, pipeline, count(*) AS jobs
FROM jobs
WHERE status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown')
GROUP BY status, pipeline;

-- name: JobStatsClaimable :one
-- The claimable queue at @now (unix microseconds): how many jobs a claim
-- could take, and since when the oldest has waited (0 when none). A range on
-- jobs_claimable_idx: the expression, the status terms and the unary + must
-- stay identical to JobClaimCandidates'.
SELECT count(*) AS claimable,
    CAST(coalesce(min(CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END), 0) AS INTEGER) AS oldest
FROM jobs
WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown')
    AND (CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END) <= +CAST(@now AS INTEGER);

-- name: OutboxStatsPending :many
-- Deliveries not yet landed, by sink, and when the oldest was routed: the
-- pending ones alone, through deliveries_due_idx.
SELECT sink, count(*) AS deliveries, CAST(min(created_at) AS INTEGER) AS oldest
FROM deliveries
WHERE status = 'pending'
GROUP BY sink;

-- name: OutboxStatsUnrouted :one
-- Events no relay has routed yet, and the oldest one's commit (0 when there
-- is none), through outbox_unrouted_idx.
SELECT count(*) AS events, CAST(coalesce(min(created_at), 0) AS INTEGER) AS oldest
FROM outbox
WHERE routed_at IS NULL;
