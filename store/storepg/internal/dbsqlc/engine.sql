-- name: JobClaim :many
-- Claims up to @max jobs in one statement. The candidate scan walks
-- jobs_claimable_idx in the order jobs became claimable (its expression must
-- stay identical to the index's) and locks rows as LIMIT takes them, skipping
-- rows another claimer holds; a row changed since the snapshot is rechecked
-- against the WHERE clause when locked, so a job just claimed elsewhere is
-- passed over. The candidate keeps the old status and owner for the event,
-- and the status is returned too (a takeover is a claim from running).
-- An outcome_unknown job sorts at its run_after; without one its key is NULL
-- and it is never claimed (only ResolveJob settles it). @now, when not NULL,
-- is the time the claim runs at (tests); NULL is the database's clock.
WITH candidate AS (
    SELECT id, status AS old_status, lease_owner AS old_owner
    FROM jobs
    WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown')
        AND (CASE WHEN status = 'running' THEN lease_until
            WHEN status = 'outcome_unknown' THEN run_after
            ELSE coalesce(run_after, created_at) END) <= coalesce(sqlc.narg(now)::timestamptz, now())
    ORDER BY (CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END)
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
),
job AS (
    UPDATE jobs
    SET status = 'running',
        lease_owner = @owner::text,
        lease_until = coalesce(sqlc.narg(now)::timestamptz, now()) + @lease_duration::interval,
        attempt = jobs.attempt + 1,
        budget_attempts = jobs.budget_attempts + 1,
        run_after = NULL,
        last_event_seq = jobs.last_event_seq + 1,
        updated_at = now()
    FROM candidate
    WHERE jobs.id = candidate.id
    RETURNING jobs.*
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt,
        -- The messages of store.ClaimMessage.
        CASE candidate.old_status
            WHEN 'running' THEN @takeover_message::text || coalesce(candidate.old_owner, '')
            WHEN 'outcome_unknown' THEN @reconcile_message::text
            ELSE @claim_message::text END
    FROM job
    JOIN candidate ON candidate.id = job.id
)
SELECT job.*, candidate.old_status::text AS claimed_from
FROM job JOIN candidate ON candidate.id = job.id
ORDER BY job.created_at, job.id;

-- name: DocumentGet :one
SELECT data FROM documents
WHERE tenant = @tenant::text AND sha256 = @sha256::text;

-- name: CheckpointList :many
-- In lifecycle order, then by chunk (the whole stage, -1, first).
SELECT * FROM job_checkpoints
WHERE job_id = @job_id::uuid
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
WHERE tenant = @tenant::text AND stage_key = @stage_key::text
ORDER BY created_at DESC
LIMIT 1;

-- name: LLMAttemptRecord :one
-- Journals an attempt under the job's tenant and, when billed, adds its usage
-- to the job, in one statement. No row: no such job. An attempt is billed
-- only if no billed attempt of the job has its bill identity (the provider
-- request id, else the provider key); the unique index
-- llm_attempts_billed_once settles a race between two such inserts. With
-- @fenced the row is written only while the lease (@owner, @lease_attempt)
-- holds the job: the fence locks the job's row, so a claim that takes the
-- job over commits before or after the whole write, never in between. No
-- row then: lease lost.
WITH fence AS (
    SELECT id FROM jobs
    WHERE id = @job_id::uuid AND @fenced::boolean
        AND lease_owner = @owner::text AND attempt = @lease_attempt::integer AND status = 'running'
    FOR UPDATE
),
attempt AS (
    INSERT INTO llm_attempts (
        job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed,
        prompt_tokens, completion_tokens, cost_micros, latency_ms,
        provider_request_id, error, model, price_class
    )
    SELECT jobs.id, jobs.tenant, @job_attempt::integer, @stage::text, @chunk::integer,
        @provider_key::text, @outcome::text,
        @billed::boolean AND NOT EXISTS (
            SELECT 1 FROM llm_attempts billed
            WHERE billed.job_id = jobs.id AND billed.billed
                AND (CASE WHEN billed.provider_request_id <> '' THEN 'req:' || billed.provider_request_id
                    ELSE 'key:' || billed.provider_key END)
                  = (CASE WHEN @provider_request_id::text <> '' THEN 'req:' || @provider_request_id::text
                    ELSE 'key:' || @provider_key::text END)),
        @prompt_tokens::bigint, @completion_tokens::bigint, @cost_micros::bigint,
        @latency_ms::bigint, @provider_request_id::text, @error::text, @model::text, @price_class::text
    FROM jobs
    WHERE jobs.id = @job_id::uuid AND (NOT @fenced::boolean OR EXISTS (SELECT 1 FROM fence))
    RETURNING id, job_id, billed, prompt_tokens, completion_tokens, cost_micros
),
usage AS (
    UPDATE jobs
    SET prompt_tokens = jobs.prompt_tokens + attempt.prompt_tokens,
        completion_tokens = jobs.completion_tokens + attempt.completion_tokens,
        cost_micros = jobs.cost_micros + attempt.cost_micros,
        llm_calls = jobs.llm_calls + 1,
        budget_tokens = jobs.budget_tokens + attempt.prompt_tokens + attempt.completion_tokens,
        updated_at = now()
    FROM attempt
    WHERE jobs.id = attempt.job_id AND attempt.billed
)
SELECT id FROM attempt;

-- name: LLMAttemptList :many
SELECT * FROM llm_attempts
WHERE job_id = @job_id::uuid
ORDER BY id;

-- name: JobComputedSuccessGet :one
SELECT * FROM jobs
WHERE tenant = @tenant::text
    AND dedup_key = @dedup_key::text
    AND status = 'succeeded'
    AND deduplicated_from IS NULL;

-- name: JobTransition :one
-- Moves a running job to @status, fenced like CheckpointWriteMany, clearing the
-- lease and appending its event. The caller checks that @status is allowed
-- and decides every parameter (store.JobTransitionParams.Write). A NULL error
-- keeps the job's last one, a NULL output likewise. No row: lease lost. When
-- @parks (the target would leave the job waiting) and a cancel was requested
-- while the job ran, the cancel wins: the job is cancelled instead, with
-- @cancelled_message, so the request is not lost between two heartbeats.
WITH job AS (
    UPDATE jobs
    SET status = CASE WHEN cancel_requested AND @parks::boolean THEN 'cancelled' ELSE @status::text END,
        error = coalesce(sqlc.narg(error)::jsonb, error),
        output = coalesce(sqlc.narg(output)::jsonb, output),
        run_after = CASE WHEN cancel_requested AND @parks::boolean THEN NULL ELSE sqlc.narg(run_after)::timestamptz END,
        finished_at = CASE WHEN @finished::boolean OR (cancel_requested AND @parks::boolean) THEN now() ELSE NULL END,
        updated_at = now(),
        lease_owner = NULL,
        lease_until = NULL,
        budget_attempts = budget_attempts - CASE WHEN @refund_attempt::boolean THEN 1 ELSE 0 END,
        last_event_seq = last_event_seq + 1
    WHERE id = @job_id::uuid
        AND lease_owner = @owner::text
        AND attempt = @attempt::integer
        AND status = 'running'
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message, next_attempt_at)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt,
        CASE WHEN job.status <> @status::text THEN @cancelled_message::text ELSE @message::text END,
        CASE WHEN job.status IN ('retry_wait', 'outcome_unknown') THEN job.run_after END
    FROM job
)
SELECT * FROM job;

-- name: OutboxList :many
-- A job's events. routed: none while the event is in the routing queue
-- (outbox_unrouted); else when it was routed - routed_at for an event
-- routed before migration 0033, the creation of its first delivery after
-- it (routing no longer writes the outbox row), the event's own commit for
-- one routed to no sink.
SELECT sqlc.embed(o),
    EXISTS (SELECT 1 FROM outbox_unrouted u WHERE u.id = o.id) AS unrouted,
    coalesce(o.routed_at, (SELECT min(d.created_at) FROM deliveries d WHERE d.outbox_id = o.id), o.created_at)::timestamptz AS routed
FROM outbox o
WHERE o.job_id = @job_id::uuid
ORDER BY o.id;
