-- The engine's queries. Every fenced write names the job by its lease in the
-- UPDATE's WHERE clause: (id, lease_owner, attempt, status 'running'). Writes
-- run one at a time on the single writer, so the fence checked by that UPDATE
-- holds until the transaction commits; no row means the lease is lost, and
-- the caller writes nothing else and rolls back.

-- name: JobClaimCandidates :many
-- The jobs a claim takes, in the order they became claimable, with the
-- status and owner they had (for the event). An outcome_unknown job sorts at
-- its run_after; without one its key is NULL and it is never claimed (only
-- ResolveJob settles it). The expression and the status terms must stay
-- identical to jobs_claimable_idx's, so the scan is a range on that index
-- stopping at @now. There is no SKIP LOCKED, and no need: claims run in write
-- transactions, one at a time. The CAST types @now for sqlc (as text it
-- would compare greater than every integer); the unary + strips the CAST's
-- INTEGER affinity, which would otherwise be applied to the indexed
-- expression and turn the range on the index into a full scan of it.
SELECT id, status, lease_owner
FROM jobs
WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown')
    AND (CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END) <= +CAST(@now AS INTEGER)
ORDER BY (CASE WHEN status = 'running' THEN lease_until
    WHEN status = 'outcome_unknown' THEN run_after
    ELSE coalesce(run_after, created_at) END)
LIMIT @max;

-- name: JobClaim :one
-- Takes one candidate of JobClaimCandidates in the same transaction. The
-- caller appends the event (JobEventAppend).
UPDATE jobs
SET status = 'running',
    lease_owner = @owner,
    lease_until = @lease_until,
    attempt = attempt + 1,
    budget_attempts = budget_attempts + 1,
    run_after = NULL,
    last_event_seq = last_event_seq + 1,
    updated_at = @now
WHERE id = @id
RETURNING *;

-- name: JobHeartbeat :one
-- Extends a lease while (owner, attempt) still hold it. No row: lease lost.
UPDATE jobs
SET lease_until = @lease_until
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING cancel_requested;

-- name: DocumentGet :one
SELECT data FROM documents
WHERE tenant = @tenant AND sha256 = @sha256;

-- name: CheckpointList :many
-- In lifecycle order, then by chunk (the whole stage, -1, first).
SELECT * FROM job_checkpoints
WHERE job_id = @job_id
ORDER BY CASE stage
        WHEN 'uploaded' THEN 1
        WHEN 'text_extracted' THEN 2
        WHEN 'chunks_ready' THEN 3
        WHEN 'llm_done' THEN 4
        WHEN 'validated' THEN 5
        WHEN 'published' THEN 6
    END,
    chunk;

-- name: CheckpointGetByStageKey :one
-- The decision cache: the newest result of a stage key in the tenant.
SELECT * FROM job_checkpoints
WHERE tenant = @tenant AND stage_key = @stage_key
ORDER BY created_at DESC
LIMIT 1;

-- name: JobCheckpointFence :one
-- The fence of a checkpoint write that does not advance the stage.
-- No row: lease lost.
UPDATE jobs
SET updated_at = @now
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING tenant, attempt;

-- name: JobStageAdvance :one
-- The fence of a checkpoint write that advances the stage to @stage. The
-- caller appends the event (JobEventAppend). No row: lease lost.
UPDATE jobs
SET stage = @stage,
    last_event_seq = last_event_seq + 1,
    updated_at = @now
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING tenant, attempt;

-- name: JobStageSet :one
-- Moves the job's stage to @stage without an event (a stage-only advance
-- carried in a checkpoint write), fenced. No row: lease lost.
UPDATE jobs
SET stage = @stage,
    updated_at = @now
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING attempt;

-- name: CheckpointUpsert :exec
-- Records a checkpoint, replacing the one of the same (job, stage, chunk).
INSERT INTO job_checkpoints (job_id, tenant, stage, chunk, stage_key, code_version, attempt, output, created_at, reused_from)
VALUES (@job_id, @tenant, @stage, @chunk, @stage_key, @code_version, @attempt, @output, @created_at, @reused_from)
ON CONFLICT (job_id, stage, chunk) DO UPDATE
SET stage_key = excluded.stage_key,
    code_version = excluded.code_version,
    attempt = excluded.attempt,
    output = excluded.output,
    created_at = excluded.created_at,
    reused_from = excluded.reused_from;

-- name: LLMAttemptInsert :one
-- Journals an attempt under the job's tenant, billed only if no billed
-- attempt of the job has its provider key: a provider bills a key once. The
-- caller adds a billed attempt's usage (JobUsageAdd). Writes are serialised,
-- so the check (on the unique index llm_attempts_billed_once) cannot race
-- another insert, and the index never refuses this one. No row: no such job.
INSERT INTO llm_attempts (
    job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed,
    prompt_tokens, completion_tokens, cost_micros, latency_ms,
    provider_request_id, error, created_at, model, price_class
)
SELECT jobs.id, jobs.tenant, @job_attempt, @stage, @chunk,
    @provider_key, @outcome,
    CAST(@billed AS BOOLEAN) AND NOT EXISTS (
        SELECT 1 FROM llm_attempts AS billed
        WHERE billed.job_id = jobs.id AND billed.billed
            AND (CASE WHEN billed.provider_request_id <> '' THEN 'req:' || billed.provider_request_id
                ELSE 'key:' || billed.provider_key END)
              = (CASE WHEN @provider_request_id <> '' THEN 'req:' || @provider_request_id
                ELSE 'key:' || @provider_key END)),
    @prompt_tokens, @completion_tokens, @cost_micros,
    @latency_ms, @provider_request_id, @error, @created_at, @model, @price_class
FROM jobs
WHERE jobs.id = @job_id
RETURNING id, billed;

-- name: JobUsageAdd :exec
-- Adds a billed attempt's usage to its job, in the attempt's transaction.
UPDATE jobs
SET prompt_tokens = prompt_tokens + @prompt_tokens,
    completion_tokens = completion_tokens + @completion_tokens,
    cost_micros = cost_micros + @cost_micros,
    llm_calls = llm_calls + 1,
    budget_tokens = budget_tokens + @prompt_tokens + @completion_tokens,
    updated_at = @now
WHERE id = @id;

-- name: LLMAttemptList :many
SELECT * FROM llm_attempts
WHERE job_id = @job_id
ORDER BY id;

-- name: JobComputedSuccessGet :one
SELECT * FROM jobs
WHERE tenant = @tenant
    AND dedup_key = @dedup_key
    AND status = 'succeeded'
    AND deduplicated_from IS NULL;

-- name: JobPublishSource :one
-- The computed success of the job's dedup key by another job of its tenant,
-- whose output a publish copies. No row: the job computes its own.
SELECT other.id, other.output
FROM jobs AS self
JOIN jobs AS other ON other.tenant = self.tenant AND other.dedup_key = self.dedup_key
WHERE self.id = @id
    AND other.id <> self.id
    AND other.status = 'succeeded'
    AND other.deduplicated_from IS NULL;

-- name: JobPublish :one
-- The published stage, fenced, clearing the lease. The caller decides
-- @output and @deduplicated_from (JobPublishSource) and appends the event
-- (JobEventAppend) in the same transaction; the trigger jobs_announce_update
-- writes its outbox event. No row: lease lost.
UPDATE jobs
SET status = 'succeeded',
    stage = 'published',
    output = @output,
    deduplicated_from = @deduplicated_from,
    updated_at = @now,
    finished_at = @now,
    lease_owner = NULL,
    lease_until = NULL,
    last_event_seq = last_event_seq + 1
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING *;

-- name: JobTransition :one
-- Moves a running job to @status, fenced, clearing the lease. The caller
-- checks that @status is allowed and appends the event (JobEventAppend).
-- A NULL error keeps the job's last one, a NULL output likewise (the caller
-- passes one for awaiting_approval: the plan shown for review). No row: lease
-- lost. A cancel requested while the job ran wins over a target that would
-- park it (@parks: retry_wait, outcome_unknown, awaiting_approval): the job
-- is cancelled instead, so the request is not lost between two heartbeats.
UPDATE jobs
SET status = CASE WHEN cancel_requested = 1 AND CAST(@parks AS BOOLEAN) = 1 THEN 'cancelled' ELSE @status END,
    error = coalesce(sqlc.narg(error), error),
    output = coalesce(sqlc.narg(output), output),
    run_after = CASE WHEN cancel_requested = 1 AND CAST(@parks AS BOOLEAN) = 1 THEN NULL ELSE sqlc.narg(run_after) END,
    finished_at = CASE WHEN cancel_requested = 1 AND CAST(@parks AS BOOLEAN) = 1 THEN @now ELSE sqlc.narg(finished_at) END,
    updated_at = @now,
    lease_owner = NULL,
    lease_until = NULL,
    budget_attempts = budget_attempts - CAST(@refund_attempt AS BOOLEAN),
    last_event_seq = last_event_seq + 1
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'running'
RETURNING *;

-- name: OutboxList :many
SELECT * FROM outbox
WHERE job_id = @job_id
ORDER BY id;

-- name: CheckpointGetByStageKeys :many
-- The decision cache for many keys (@stage_keys, a JSON array) in one read;
-- the caller keeps the newest of each key.
SELECT * FROM job_checkpoints
WHERE tenant = @tenant
    AND stage_key IN (SELECT value FROM json_each(@stage_keys))
ORDER BY created_at DESC;
