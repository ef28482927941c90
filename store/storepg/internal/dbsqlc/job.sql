-- name: JobSubmit :one
-- Creates a job for a new idempotency key in one statement. When the key
-- already exists, the key insert returns nothing, so does every later step,
-- and the statement returns no row.
WITH idem AS (
    INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id)
    VALUES (@tenant::text, @method::text, @idempotency_key::text, @fingerprint::text, @id::uuid)
    ON CONFLICT DO NOTHING
    RETURNING job_id
),
document AS (
    INSERT INTO documents (tenant, sha256, media_type, data, size_bytes)
    SELECT @tenant::text, @document_sha256::text, @document_media_type::text,
        @document_data::bytea, @document_size_bytes::bigint
    FROM idem
    ON CONFLICT DO NOTHING
),
source AS (
    SELECT jobs.id, jobs.output
    FROM jobs
    WHERE jobs.tenant = @tenant::text
        AND jobs.dedup_key = @dedup_key::text
        AND jobs.status = 'succeeded'
        AND jobs.deduplicated_from IS NULL
),
job AS (
    INSERT INTO jobs (
        id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
        prompt_version, model_profile, status, stage, output, deduplicated_from,
        document_sha256, document_media_type, document_name, document_size_bytes,
        params, labels, finished_at
    )
    SELECT idem.job_id, @tenant::text, @idempotency_key::text, @dedup_key::text,
        @pipeline::text, @pipeline_version::integer, @prompt_version::text,
        @model_profile::text,
        CASE WHEN source.id IS NULL THEN 'queued' ELSE 'succeeded' END,
        CASE WHEN source.id IS NULL THEN 'uploaded' ELSE 'published' END,
        source.output, source.id,
        @document_sha256::text, @document_media_type::text, @document_name::text,
        @document_size_bytes::bigint, @params::jsonb, @labels::jsonb,
        CASE WHEN source.id IS NULL THEN NULL ELSE now() END
    FROM idem
    LEFT JOIN source ON true
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, 1, job.status, job.stage, job.attempt,
        CASE WHEN job.deduplicated_from IS NULL THEN 'submitted'
            ELSE 'deduplicated from ' || job.deduplicated_from::text END
    FROM job
)
SELECT * FROM job;

-- name: JobGetByIdempotencyKey :one
-- Reads the job an existing key created, with the key's fingerprint. Run as
-- its own statement after JobSubmit returned nothing, so its snapshot sees
-- the concurrent winner's commit.
SELECT idempotency_keys.fingerprint, sqlc.embed(jobs)
FROM idempotency_keys
JOIN jobs ON jobs.id = idempotency_keys.job_id
WHERE idempotency_keys.tenant = @tenant::text
    AND idempotency_keys.method = @method::text
    AND idempotency_keys.idem_key = @idempotency_key::text;

-- name: JobGetByID :one
SELECT * FROM jobs
WHERE tenant = @tenant::text AND id = @id::uuid;

-- name: JobList :many
-- One page, newest first. A nil filter or cursor matches every row.
SELECT * FROM jobs
WHERE tenant = @tenant::text
    AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
    AND (sqlc.narg(pipeline)::text IS NULL OR pipeline = sqlc.narg(pipeline)::text)
    AND (sqlc.narg(after_created_at)::timestamptz IS NULL
        OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: JobComplete :one
-- Publishes a job's output and appends its event in one statement. The
-- UPDATE takes the row lock, so last_event_seq + 1 is this transition's seq.
WITH job AS (
    UPDATE jobs
    SET status = 'succeeded',
        stage = 'published',
        output = @output::jsonb,
        finished_at = now(),
        updated_at = now(),
        lease_owner = NULL,
        lease_until = NULL,
        last_event_seq = last_event_seq + 1
    WHERE tenant = @tenant::text
        AND id = @id::uuid
        AND status NOT IN ('succeeded', 'failed', 'cancelled', 'dead_lettered')
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, job.last_event_seq, job.status, job.stage, job.attempt, 'published'
    FROM job
)
SELECT * FROM job;
