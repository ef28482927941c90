-- Runs: named groups of items (docs/architecture.md, "Runs"). An item joins
-- a run in the statement that submits its job (JobSubmitMany's run_item) or,
-- for a key that existed, with RunItemInsertMany right after the read that
-- answers it.

-- name: RunInsert :one
-- Creates a run for a new key; no row when the key exists (RunGetByKey then
-- reads it, on a fresh snapshot).
INSERT INTO runs (id, tenant, idem_key, fingerprint, name, pipeline, model_profile, params, labels, provider_batch)
VALUES (@id::uuid, @tenant::text, @idem_key::text, @fingerprint::text, @name::text,
    @pipeline::text, @model_profile::text, @params::jsonb, @labels::jsonb, @provider_batch::boolean)
ON CONFLICT (tenant, idem_key) DO NOTHING
RETURNING *;

-- name: RunGetByKey :one
SELECT * FROM runs WHERE tenant = @tenant::text AND idem_key = @idem_key::text;

-- name: RunGetByID :one
SELECT * FROM runs WHERE tenant = @tenant::text AND id = @id::uuid;

-- name: RunList :many
-- One page of runs, newest first, after the cursor.
SELECT * FROM runs
WHERE tenant = @tenant::text
    AND (sqlc.narg(after_created_at)::timestamptz IS NULL
        OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: RunProgress :many
-- A run's items grouped by their job's status and whether they were reused,
-- in one snapshot.
SELECT jobs.status,
    (run_items.outcome <> 'created')::boolean AS reused,
    count(*)::bigint AS items,
    coalesce(sum(jobs.last_event_seq), 0)::bigint AS seq,
    coalesce(sum(jobs.prompt_tokens), 0)::bigint AS prompt_tokens,
    coalesce(sum(jobs.completion_tokens), 0)::bigint AS completion_tokens,
    coalesce(sum(jobs.cost_micros), 0)::bigint AS cost_micros,
    coalesce(sum(jobs.llm_calls), 0)::bigint AS llm_calls,
    count(*) FILTER (WHERE jobs.finished_at >= @recent_since::timestamptz)::bigint AS finished_recently
FROM run_items
JOIN jobs ON jobs.id = run_items.job_id
WHERE run_items.run_id = @run_id::uuid
GROUP BY jobs.status, run_items.outcome <> 'created';

-- name: RunItemGetMany :many
-- The items of a run among the keys, with their jobs.
SELECT run_items.item_key, run_items.fingerprint, run_items.outcome, sqlc.embed(jobs)
FROM run_items
JOIN jobs ON jobs.id = run_items.job_id
WHERE run_items.run_id = @run_id::uuid
    AND run_items.tenant = @tenant::text
    AND run_items.item_key = ANY(@keys::text[]);

-- name: RunItemInsertMany :exec
-- Records items whose key existed: they join as the job their key names.
-- An item already in the run keeps its first record.
INSERT INTO run_items (run_id, item_key, tenant, fingerprint, job_id, outcome)
SELECT unnest(@run_id::uuid[]), unnest(@item_key::text[]), unnest(@tenant::text[]),
    unnest(@fingerprint::text[]), unnest(@job_id::uuid[]), unnest(@outcome::text[])
ORDER BY 1, 2
ON CONFLICT DO NOTHING;

-- name: RunOperationInsert :one
-- Takes the key of a run-wide call; no row when it exists (then
-- RunOperationGet reads it, on a fresh snapshot).
INSERT INTO run_operations (tenant, method, idem_key, fingerprint, run_id)
VALUES (@tenant::text, @method::text, @idem_key::text, @fingerprint::text, @run_id::uuid)
ON CONFLICT DO NOTHING
RETURNING run_id;

-- name: RunOperationGet :one
SELECT fingerprint, run_id, result FROM run_operations
WHERE tenant = @tenant::text AND method = @method::text AND idem_key = @idem_key::text;

-- name: RunOperationSetResult :exec
UPDATE run_operations SET result = @result::integer
WHERE tenant = @tenant::text AND method = @method::text AND idem_key = @idem_key::text;

-- name: RunReplayFailures :many
-- Replays every failed or dead-lettered job of the run as JobReplay does
-- without a stage to re-run: queued, fresh budget, error cleared,
-- checkpoints and attempt kept; with its event.
WITH job AS (
    UPDATE jobs
    SET status = 'queued',
        error = NULL,
        finished_at = NULL,
        run_after = NULL,
        cancel_requested = false,
        lease_owner = NULL,
        lease_until = NULL,
        budget_started_at = now(),
        budget_attempts = 0,
        budget_tokens = 0,
        last_event_seq = last_event_seq + 1,
        updated_at = now()
    FROM run_items
    WHERE run_items.run_id = @run_id::uuid
        AND jobs.id = run_items.job_id
        AND jobs.tenant = @tenant::text
        AND jobs.status = ANY(@from_statuses::text[])
    RETURNING jobs.*
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message, actor_key, actor_role, actor_rpc)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text,
        @actor_key::text, @actor_role::text, @actor_rpc::text
    FROM job
)
SELECT job.id, job.tenant, job.last_event_seq FROM job;

-- name: RunCancelMark :one
-- Marks a run cancelled; a cancelled run keeps its first time.
UPDATE runs SET cancelled_at = coalesce(cancelled_at, now())
WHERE tenant = @tenant::text AND id = @id::uuid
RETURNING *;

-- name: RunCancelJobs :many
-- Cancels the jobs the run created that are not terminal, as JobCancel
-- does each: at once, or cancel_requested for a running one (no event).
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
    FROM run_items
    WHERE run_items.run_id = @run_id::uuid
        AND run_items.outcome = 'created'
        AND jobs.id = run_items.job_id
        AND jobs.tenant = @tenant::text
        AND jobs.status = ANY(@from_statuses::text[])
        AND NOT (jobs.status = 'running' AND jobs.cancel_requested)
    RETURNING jobs.*
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message, actor_key, actor_role, actor_rpc)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, @message::text,
        @actor_key::text, @actor_role::text, @actor_rpc::text
    FROM job
    WHERE job.status = 'cancelled'
)
SELECT job.id, job.tenant, job.last_event_seq, job.status FROM job;

-- name: RunDefaultsGetMany :many
-- The params and labels of runs, put under those of their items' jobs when
-- the jobs are read: a run's are stored once, on its row, not copied into
-- each item's (docs/architecture.md, "Runs").
SELECT id, params, labels FROM runs WHERE id = ANY(@ids::uuid[]);
