-- name: DocumentGetMany :many
-- The documents of a claimed batch, in one read.
SELECT tenant, sha256, data FROM documents
WHERE (tenant, sha256) IN (
    SELECT unnest(@tenants::text[]), unnest(@sha256s::text[]));

-- name: CheckpointGetByStageKeys :many
-- The decision cache for many keys, the newest result of each key found,
-- and, in the same read, the computed success of @dedup_key in the tenant
-- (when not empty): that row has an empty stage key and the computing job's
-- id as its job_id.
(SELECT DISTINCT ON (stage_key) job_id, stage_key, stage, chunk, code_version, attempt, output, reused_from, created_at
FROM job_checkpoints
WHERE tenant = @tenant::text AND stage_key = ANY(@stage_keys::text[])
ORDER BY stage_key, created_at DESC)
UNION ALL
(SELECT id, '', 'published', -1, '', attempt, ''::bytea, '', created_at
FROM jobs
WHERE tenant = @tenant::text
    AND dedup_key = @dedup_key::text
    AND @dedup_key::text <> ''
    AND status = 'succeeded'
    AND deduplicated_from IS NULL);

-- name: CheckpointGetByOneStageKey :many
-- CheckpointGetByStageKeys for a single key (a one-chunk job's call), as
-- stage_key = @stage_key: its generic plan is its custom plan, so Postgres
-- keeps it (docs/architecture.md, "Generic plans for the engine, custom
-- plans for the rest"). The generic plan of = ANY counts ten keys and costs
-- four times a custom plan of one, and under plan_cache_mode = auto
-- Postgres planned that statement at every execution (issue 33).
(SELECT DISTINCT ON (stage_key) job_id, stage_key, stage, chunk, code_version, attempt, output, reused_from, created_at
FROM job_checkpoints
WHERE tenant = @tenant::text AND stage_key = @stage_key::text
ORDER BY stage_key, created_at DESC)
UNION ALL
(SELECT id, '', 'published', -1, '', attempt, ''::bytea, '', created_at
FROM jobs
WHERE tenant = @tenant::text
    AND dedup_key = @dedup_key::text
    AND @dedup_key::text <> ''
    AND status = 'succeeded'
    AND deduplicated_from IS NULL);

-- name: JobHeartbeatMany :many
-- Extends every lease still held, from @now or the database's clock. A
-- lease not returned is lost.
UPDATE jobs
SET lease_until = coalesce(sqlc.narg(now)::timestamptz, now()) + @lease_duration::interval
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@owners::text[]) AS owner,
    unnest(@attempts::integer[]) AS attempt) AS lease
WHERE jobs.id = lease.id
    AND jobs.lease_owner = lease.owner
    AND jobs.attempt = lease.attempt
    AND jobs.status = 'running'
RETURNING jobs.id, jobs.cancel_requested;

-- name: CheckpointWriteMany :one
-- Several checkpoints of one job and, when @record_attempt, the LLM attempt
-- they rest on, in one statement. The attempt is journaled unfenced, as
-- LLMAttemptRecord journals it (billed only on its bill identity's first
-- bill); the job's one UPDATE adds a bill's usage whatever the lease, and
-- advances the stage and writes the checkpoints and their events only while
-- (owner, attempt, running) hold on the row it locked: the fence. Events
-- take the seqs after the job's last: @advances of them; a checkpoint with
-- an event (event_offset > 0) has events_after of them after its own.
-- A checkpoint of a (job, stage, chunk) that has one replaces it (replaced);
-- else it is inserted, without ON CONFLICT: a speculative insertion costs a
-- WAL record more per row, and two fenced writes of one job never run at
-- once (the job's row lock orders them, and the later one is fenced out
-- unless it holds the lease, whose writes are sequential). Whether it has
-- one is read from what replaced updated, not from job_checkpoints again:
-- the planner, counting 100 rows for jsonb_to_recordset, answered that
-- anti-join with a scan of the whole table (issue 33).
WITH attempt AS (
    INSERT INTO llm_attempts (
        job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed,
        prompt_tokens, completion_tokens, cost_micros, latency_ms,
        provider_request_id, error, model, price_class
    )
    SELECT jobs.id, jobs.tenant, @job_attempt::integer, @attempt_stage::text, @attempt_chunk::integer,
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
    WHERE jobs.id = @job_id::uuid AND @record_attempt::boolean
    RETURNING job_id, billed, prompt_tokens, completion_tokens, cost_micros
),
bill AS (
    SELECT * FROM attempt WHERE attempt.billed
),
job AS (
    UPDATE jobs
    SET stage = CASE WHEN jobs.lease_owner = @owner::text AND jobs.attempt = @attempt::integer AND jobs.status = 'running'
            THEN coalesce(sqlc.narg(advance_to)::text, jobs.stage) ELSE jobs.stage END,
        last_event_seq = jobs.last_event_seq
            + CASE WHEN jobs.lease_owner = @owner::text AND jobs.attempt = @attempt::integer AND jobs.status = 'running'
                THEN @advances::integer ELSE 0 END,
        prompt_tokens = jobs.prompt_tokens + coalesce((SELECT prompt_tokens FROM bill), 0),
        completion_tokens = jobs.completion_tokens + coalesce((SELECT completion_tokens FROM bill), 0),
        cost_micros = jobs.cost_micros + coalesce((SELECT cost_micros FROM bill), 0),
        llm_calls = jobs.llm_calls + (SELECT count(*) FROM bill)::integer,
        budget_tokens = jobs.budget_tokens + coalesce((SELECT prompt_tokens + completion_tokens FROM bill), 0),
        updated_at = now()
    WHERE jobs.id = @job_id::uuid
        AND ((jobs.lease_owner = @owner::text AND jobs.attempt = @attempt::integer AND jobs.status = 'running')
            OR EXISTS (SELECT 1 FROM bill))
    RETURNING id, tenant, attempt, last_event_seq,
        coalesce(lease_owner = @owner::text AND attempt = @attempt::integer AND status = 'running', false) AS fenced
),
replaced AS (
    UPDATE job_checkpoints AS cp
    SET stage_key = c.stage_key,
        code_version = c.code_version,
        attempt = job.attempt,
        output = decode(c.output, 'base64'),
        reused_from = c.reused_from,
        created_at = now()
    FROM job
    JOIN jsonb_to_recordset(@checkpoints::jsonb) AS c(
        stage text, chunk integer, stage_key text, code_version text,
        output text, reused_from text, event_offset integer, events_after integer, message text) ON true
    WHERE job.fenced AND cp.job_id = job.id AND cp.stage = c.stage AND cp.chunk = c.chunk
    RETURNING cp.stage, cp.chunk
),
checkpoint AS (
    INSERT INTO job_checkpoints (job_id, tenant, stage, chunk, stage_key, code_version, attempt, output, reused_from)
    SELECT job.id, job.tenant, c.stage, c.chunk, c.stage_key, c.code_version, job.attempt,
        decode(c.output, 'base64'), c.reused_from
    FROM job
    JOIN jsonb_to_recordset(@checkpoints::jsonb) AS c(
        stage text, chunk integer, stage_key text, code_version text,
        output text, reused_from text, event_offset integer, events_after integer, message text) ON true
    WHERE job.fenced AND NOT EXISTS (
        SELECT 1 FROM replaced WHERE replaced.stage = c.stage AND replaced.chunk = c.chunk)
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq - c.events_after,
        'running', c.stage, job.attempt, c.message
    FROM job
    JOIN jsonb_to_recordset(@checkpoints::jsonb) AS c(
        stage text, chunk integer, stage_key text, code_version text,
        output text, reused_from text, event_offset integer, events_after integer, message text) ON true
    WHERE job.fenced AND c.event_offset > 0
)
SELECT coalesce((SELECT fenced FROM job), false)::boolean AS fenced,
    (SELECT count(*) FROM attempt)::integer AS journaled,
    coalesce((SELECT tenant FROM job), '')::text AS tenant,
    coalesce((SELECT last_event_seq FROM job), 0)::integer AS last_event_seq;

-- name: JobPublishMany :many
-- The completer's batch: for each job of @jobs, its checkpoints (merge,
-- validated) and the published stage (output, succeeded, its event; the
-- trigger jobs_announce writes the outbox event), in one statement. Each
-- job's UPDATE is fenced on its own (owner, attempt, running), rechecked
-- on the newest row version under its row lock; a job it leaves out writes
-- nothing and is absent from the result, and the others commit. A job
-- whose dedup key another job already computed publishes that job's output
-- as deduplicated. Two jobs of one key in one batch, or racing another
-- statement, violate jobs_computed_success_key: the caller then publishes
-- the batch's jobs one by one, each run once more on that violation with a
-- snapshot that sees the other's success. A job's checkpoint events take
-- the seqs after its last (event_offset, 1-based; 0: no event), its
-- published event the next.
WITH source AS (
    SELECT self.id AS job_id, other.id, other.output
    FROM jsonb_to_recordset(@jobs::jsonb) AS batch(
        job_id uuid, owner text, attempt integer, output jsonb, message text, advances integer)
    JOIN jobs AS self ON self.id = batch.job_id
    JOIN jobs AS other ON other.tenant = self.tenant AND other.dedup_key = self.dedup_key
    WHERE other.id <> self.id
        AND other.status = 'succeeded'
        AND other.deduplicated_from IS NULL
),
job AS (
    UPDATE jobs
    SET status = 'succeeded',
        stage = 'published',
        output = coalesce(source.output, batch.output),
        deduplicated_from = source.id,
        finished_at = now(),
        updated_at = now(),
        lease_owner = NULL,
        lease_until = NULL,
        last_event_seq = jobs.last_event_seq + batch.advances + 1
    FROM jsonb_to_recordset(@jobs::jsonb) AS batch(
        job_id uuid, owner text, attempt integer, output jsonb, message text, advances integer)
    LEFT JOIN source ON source.job_id = batch.job_id
    WHERE jobs.id = batch.job_id
        AND jobs.lease_owner = batch.owner
        AND jobs.attempt = batch.attempt
        AND jobs.status = 'running'
    RETURNING jobs.*
),
checkpoint AS (
    INSERT INTO job_checkpoints (job_id, tenant, stage, chunk, stage_key, code_version, attempt, output, reused_from)
    SELECT job.id, job.tenant, c.stage, c.chunk, c.stage_key, c.code_version, job.attempt,
        decode(c.output, 'base64'), c.reused_from
    FROM jsonb_to_recordset(@checkpoints::jsonb) AS c(
        job_id uuid, stage text, chunk integer, stage_key text, code_version text,
        output text, reused_from text, event_offset integer, message text)
    JOIN job ON job.id = c.job_id
    ON CONFLICT (job_id, stage, chunk) DO UPDATE
    SET stage_key = excluded.stage_key,
        code_version = excluded.code_version,
        attempt = excluded.attempt,
        output = excluded.output,
        reused_from = excluded.reused_from,
        created_at = now()
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq - batch.advances - 1 + c.event_offset,
        'running', c.stage, job.attempt, c.message
    FROM jsonb_to_recordset(@checkpoints::jsonb) AS c(
        job_id uuid, stage text, chunk integer, stage_key text, code_version text,
        output text, reused_from text, event_offset integer, message text)
    JOIN job ON job.id = c.job_id
    JOIN jsonb_to_recordset(@jobs::jsonb) AS batch(
        job_id uuid, owner text, attempt integer, output jsonb, message text, advances integer) ON batch.job_id = job.id
    WHERE c.event_offset > 0
    UNION ALL
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt,
        CASE WHEN job.deduplicated_from IS NULL THEN batch.message
            ELSE batch.message || ' (deduplicated from ' || job.deduplicated_from::text || ')' END
    FROM job
    JOIN jsonb_to_recordset(@jobs::jsonb) AS batch(
        job_id uuid, owner text, attempt integer, output jsonb, message text, advances integer) ON batch.job_id = job.id
)
SELECT * FROM job;

-- name: CheckpointListMany :many
-- The checkpoints of a claimed batch's jobs that ran before, in one read.
SELECT * FROM job_checkpoints
WHERE job_id = ANY(@job_ids::uuid[]);
