-- Runs: named groups of items (docs/architecture.md, "Runs"). An item joins
-- a run in the write transaction that submits or finds its job
-- (RunItemInsert). Lists are JSON arrays read with json_each (see
-- operator.sql).

-- name: RunInsert :execrows
-- Creates a run for a new key; no row when the key exists.
INSERT INTO runs (id, tenant, idem_key, fingerprint, name, pipeline, model_profile, params, labels, provider_batch, created_at)
VALUES (@id, @tenant, @idem_key, @fingerprint, @name, @pipeline, @model_profile, @params, @labels, @provider_batch, @created_at)
ON CONFLICT (tenant, idem_key) DO NOTHING;

-- name: RunGetByKey :one
SELECT * FROM runs WHERE tenant = @tenant AND idem_key = @idem_key;

-- name: RunGetByID :one
SELECT * FROM runs WHERE tenant = @tenant AND id = @id;

-- name: RunList :many
-- One page of runs, newest first, after the cursor (the first page passes a
-- cursor past every run; see JobList).
SELECT * FROM runs
WHERE tenant = @tenant
    AND created_at <= @after_created_at
    AND (created_at < @after_created_at OR id < @after_id)
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: RunProgress :many
-- A run's items grouped by their job's status and whether they were reused.
SELECT jobs.status,
    CAST(run_items.outcome <> 'created' AS BOOLEAN) AS reused,
    CAST(count(*) AS INTEGER) AS items,
    CAST(coalesce(sum(jobs.last_event_seq), 0) AS INTEGER) AS seq,
    CAST(coalesce(sum(jobs.prompt_tokens), 0) AS INTEGER) AS prompt_tokens,
    CAST(coalesce(sum(jobs.completion_tokens), 0) AS INTEGER) AS completion_tokens,
    CAST(coalesce(sum(jobs.cost_micros), 0) AS INTEGER) AS cost_micros,
    CAST(coalesce(sum(jobs.llm_calls), 0) AS INTEGER) AS llm_calls,
    CAST(coalesce(sum(jobs.finished_at >= @recent_since), 0) AS INTEGER) AS finished_recently
FROM run_items
JOIN jobs ON jobs.id = run_items.job_id
WHERE run_items.run_id = @run_id
GROUP BY jobs.status, run_items.outcome <> 'created';

-- name: RunItemGet :one
SELECT run_items.item_key, run_items.fingerprint, run_items.outcome, sqlc.embed(jobs)
FROM run_items
JOIN jobs ON jobs.id = run_items.job_id
WHERE run_items.run_id = @run_id
    AND run_items.tenant = @tenant
    AND run_items.item_key = @item_key;

-- name: RunItemInsert :exec
-- An item already in the run keeps its first record.
INSERT INTO run_items (run_id, item_key, tenant, fingerprint, job_id, outcome, created_at)
VALUES (@run_id, @item_key, @tenant, @fingerprint, @job_id, @outcome, @created_at)
ON CONFLICT DO NOTHING;

-- name: RunOperationInsert :execrows
INSERT INTO run_operations (tenant, method, idem_key, fingerprint, run_id, created_at)
VALUES (@tenant, @method, @idem_key, @fingerprint, @run_id, @created_at)
ON CONFLICT DO NOTHING;

-- name: RunOperationGet :one
SELECT fingerprint, run_id, result FROM run_operations
WHERE tenant = @tenant AND method = @method AND idem_key = @idem_key;

-- name: RunOperationSetResult :exec
UPDATE run_operations SET result = @result
WHERE tenant = @tenant AND method = @method AND idem_key = @idem_key;

-- name: RunJobIDs :many
-- The jobs of the run in the statuses given; with @created_only, only those
-- the run created.
SELECT run_items.job_id
FROM run_items
JOIN jobs ON jobs.id = run_items.job_id
WHERE run_items.run_id = @run_id
    AND jobs.tenant = @tenant
    AND jobs.status IN (SELECT value FROM json_each(CAST(@statuses AS TEXT)))
    AND (NOT CAST(@created_only AS BOOLEAN) OR run_items.outcome = 'created')
    AND NOT (jobs.status = 'running' AND jobs.cancel_requested)
ORDER BY run_items.job_id;

-- name: RunCancelMark :execrows
UPDATE runs SET cancelled_at = coalesce(cancelled_at, @now)
WHERE tenant = @tenant AND id = @id;

-- name: RunDefaultsGetMany :many
-- The params and labels of runs, put under those of their items' jobs when
-- the jobs are read: a run's are stored once, on its row, not copied into
-- each item's (docs/architecture.md, "Runs"). @ids is a JSON array.
SELECT id, params, labels FROM runs WHERE id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));
