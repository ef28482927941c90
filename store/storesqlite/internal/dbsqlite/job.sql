-- name: JobGetByIdempotencyKey :one
-- Reads the job an existing key created, with the key's fingerprint.
SELECT idempotency_keys.fingerprint, sqlc.embed(jobs)
FROM idempotency_keys
JOIN jobs ON jobs.id = idempotency_keys.job_id
WHERE idempotency_keys.tenant = @tenant
    AND idempotency_keys.method = @method
    AND idempotency_keys.idem_key = @idempotency_key;

-- name: JobGetComputedSuccess :one
-- The computed success of a dedup key, if any; the partial unique index
-- jobs_computed_success_key allows at most one.
SELECT id, output
FROM jobs
WHERE tenant = @tenant
    AND dedup_key = @dedup_key
    AND status = 'succeeded'
    AND deduplicated_from IS NULL;

-- name: JobInsert :one
-- The retry budget counts from the job's creation.
INSERT INTO jobs (
    id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
    prompt_version, model_profile, status, stage, output, deduplicated_from,
    document_sha256, document_media_type, document_name, document_size_bytes,
    params, labels, created_at, updated_at, finished_at, budget_started_at,
    traceparent
) VALUES (
    @id, @tenant, @idempotency_key, @dedup_key, @pipeline, @pipeline_version,
    @prompt_version, @model_profile, @status, @stage, @output, @deduplicated_from,
    @document_sha256, @document_media_type, @document_name, @document_size_bytes,
    @params, @labels, @created_at, @updated_at, @finished_at, @created_at,
    @traceparent
)
RETURNING *;

-- name: JobGetByID :one
SELECT * FROM jobs
WHERE tenant = @tenant AND id = @id;

-- name: JobList :many
-- One page, newest first, after the cursor (after_created_at, after_id). An
-- empty filter matches every row. The first page passes a cursor past every
-- job rather than NULL, and the cursor is written as a range on created_at
-- plus a tie-break on id, so it stays a range on the tenant's index: SQLite
-- plans a statement once, whatever its arguments, and "? IS NULL OR" would
-- turn the range into a scan. (A row value, (created_at, id) < (?, ?), says
-- the same, but sqlc mistypes its parameters.)
SELECT * FROM jobs
WHERE jobs.tenant = @tenant
    AND (jobs.status = @status OR @status = '')
    AND (jobs.pipeline = @pipeline OR @pipeline = '')
    AND (@run_id = '' OR jobs.id IN (SELECT run_items.job_id FROM run_items WHERE run_items.run_id = @run_id))
    AND jobs.created_at <= @after_created_at
    AND (jobs.created_at < @after_created_at OR jobs.id < @after_id)
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: JobComplete :one
-- Publishes a job's output. The caller appends the event (JobEventAppend) in
-- the same transaction.
UPDATE jobs
SET status = 'succeeded',
    stage = 'published',
    output = @output,
    updated_at = @now,
    finished_at = @now,
    lease_owner = NULL,
    lease_until = NULL,
    last_event_seq = last_event_seq + 1
WHERE tenant = @tenant
    AND id = @id
    AND status NOT IN ('succeeded', 'failed', 'cancelled', 'dead_lettered')
RETURNING *;
