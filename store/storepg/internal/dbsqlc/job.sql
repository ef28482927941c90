-- name: JobSubmitMany :many
-- Creates a job for every submission whose idempotency key is new, in one
-- statement, and returns the jobs it created. The caller passes one element
-- per submission in each array, no two with the same (tenant, method, key).
-- A key that exists makes its key insert return nothing, so every later
-- step skips that submission; the caller reads those (JobGetByIdempotency-
-- KeyMany) in a statement of its own, whose snapshot sees a concurrent
-- winner that committed after this one began.
--
-- Keys, then documents, are inserted in one order (ORDER BY), so two
-- statements that share keys or documents wait for each other in that
-- order instead of deadlocking; the documents are written after the keys,
-- as a CTE the main query does not read runs when it has finished.
WITH input AS (
    -- Set-returning functions in a select list advance in lockstep: one row
    -- per array position.
    SELECT unnest(@id::uuid[]) AS id,
        unnest(@tenant::text[]) AS tenant,
        unnest(@method::text[]) AS method,
        unnest(@idempotency_key::text[]) AS idem_key,
        unnest(@fingerprint::text[]) AS fingerprint,
        unnest(@dedup_key::text[]) AS dedup_key,
        unnest(@pipeline::text[]) AS pipeline,
        unnest(@pipeline_version::integer[]) AS pipeline_version,
        unnest(@prompt_version::text[]) AS prompt_version,
        unnest(@model_profile::text[]) AS model_profile,
        unnest(@document_sha256::text[]) AS document_sha256,
        unnest(@document_media_type::text[]) AS document_media_type,
        -- The documents come as one bytea, each from its 1-based start
        -- for its size: a bytea[] of 1 KiB elements was encoded element by
        -- element into a growing buffer (docs/architecture.md, "Submitting
        -- in batches").
        substring(@documents::bytea FROM unnest(@document_start::integer[])
            FOR unnest(@document_size::integer[])) AS document_data,
        unnest(@document_name::text[]) AS document_name,
        unnest(@params::jsonb[]) AS params,
        unnest(@labels::jsonb[]) AS labels,
        nullif(unnest(@run_id::text[]), '')::uuid AS run_id,
        unnest(@traceparent::text[]) AS traceparent,
        nullif(unnest(@priority::text[]), '') AS priority
),
idem AS (
    INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id)
    SELECT input.tenant, input.method, input.idem_key, input.fingerprint, input.id
    FROM input
    ORDER BY input.tenant, input.method, input.idem_key
    ON CONFLICT DO NOTHING
    RETURNING job_id
),
created AS (
    SELECT input.*
    FROM input
    JOIN idem ON idem.job_id = input.id
),
document AS (
    INSERT INTO documents (tenant, sha256, media_type, data, size_bytes)
    SELECT created.tenant, created.document_sha256, created.document_media_type,
        created.document_data, length(created.document_data)
    FROM created
    ORDER BY created.tenant, created.document_sha256
    ON CONFLICT DO NOTHING
),
job AS (
    INSERT INTO jobs (
        id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
        prompt_version, model_profile, status, stage, output, deduplicated_from,
        document_sha256, document_media_type, document_name, document_size_bytes,
        params, labels, finished_at, traceparent, run_id, priority
    )
    SELECT created.id, created.tenant, created.idem_key, created.dedup_key,
        created.pipeline, created.pipeline_version, created.prompt_version,
        created.model_profile,
        CASE WHEN source.id IS NULL THEN 'queued' ELSE 'succeeded' END,
        CASE WHEN source.id IS NULL THEN 'uploaded' ELSE 'published' END,
        source.output, source.id,
        created.document_sha256, created.document_media_type, created.document_name,
        length(created.document_data), created.params, created.labels,
        CASE WHEN source.id IS NULL THEN NULL ELSE now() END,
        created.traceparent, created.run_id, created.priority
    FROM created
    -- At most one row (jobs_computed_success_key is unique); LIMIT 1 keeps
    -- the lookup a probe of that index per submission in every plan: a
    -- plan that costs the arrays at 10 rows (the generic plan the key
    -- gate lets this statement keep, plan_cache.go) would otherwise hash
    -- the index's every entry.
    LEFT JOIN LATERAL (
        SELECT jobs.id, jobs.output
        FROM jobs
        WHERE jobs.tenant = created.tenant
            AND jobs.dedup_key = created.dedup_key
            AND jobs.status = 'succeeded'
            AND jobs.deduplicated_from IS NULL
        LIMIT 1
    ) AS source ON true
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, 1, job.status, job.stage, job.attempt,
        CASE WHEN job.deduplicated_from IS NULL THEN 'submitted'
            ELSE 'deduplicated from ' || job.deduplicated_from::text END
    FROM job
),
-- A submission into a run (run_id not NULL) records its item with the job,
-- so a created job is never outside its run.
run_item AS (
    INSERT INTO run_items (run_id, item_key, tenant, fingerprint, job_id, outcome)
    SELECT created.run_id, created.idem_key, created.tenant, created.fingerprint, job.id,
        CASE WHEN job.deduplicated_from IS NULL THEN 'created' ELSE 'deduplicated' END
    FROM created
    JOIN job ON job.id = created.id
    WHERE created.run_id IS NOT NULL
    ON CONFLICT DO NOTHING
)
SELECT * FROM job;

-- name: JobGetByIdempotencyKeyMany :many
-- Reads the jobs that existing keys created, with each key's fingerprint;
-- ord is the key's 1-based position in the arrays. A key that does not
-- exist (freed by the sweeper) returns no row.
SELECT input.ord, idempotency_keys.fingerprint, sqlc.embed(jobs)
FROM (
    SELECT unnest(@tenant::text[]) AS tenant,
        unnest(@method::text[]) AS method,
        unnest(@idempotency_key::text[]) AS idem_key,
        generate_subscripts(@tenant::text[], 1) AS ord
) AS input
JOIN idempotency_keys ON idempotency_keys.tenant = input.tenant
    AND idempotency_keys.method = input.method
    AND idempotency_keys.idem_key = input.idem_key
JOIN jobs ON jobs.id = idempotency_keys.job_id;

-- name: JobGetByIdempotencyKey :one
-- Reads the job an existing key created, with the key's fingerprint: the
-- server's read before it queues a submission for a write.
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
-- One page, newest first. A nil filter or cursor matches every row. At most
-- @max rows, and of their sizes (params, labels, output and error as text,
-- plus 256 a row) only the rows that start within @max_bytes and the one
-- after them: the caller cuts the page at the bytes and knows from that one
-- whether a next page exists. Sizes are taken of the first @max rows only.
SELECT sqlc.embed(jobs), sized.bytes::bigint AS bytes
FROM (
    SELECT page.id, page.bytes,
        sum(page.bytes) OVER w - page.bytes - coalesce(lag(page.bytes) OVER w, 0) AS prev_start_bytes
    FROM (
        SELECT jobs.id, jobs.created_at,
            octet_length(jobs.params::text) + octet_length(jobs.labels::text)
                + coalesce(octet_length(jobs.output::text), 0) + coalesce(octet_length(jobs.error::text), 0)
                + 256 AS bytes
        FROM jobs
        WHERE tenant = @tenant::text
            AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
            AND (sqlc.narg(pipeline)::text IS NULL OR pipeline = sqlc.narg(pipeline)::text)
            AND (sqlc.narg(run_id)::uuid IS NULL OR id IN (
                SELECT run_items.job_id FROM run_items WHERE run_items.run_id = sqlc.narg(run_id)::uuid))
            AND (sqlc.narg(after_created_at)::timestamptz IS NULL
                OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
        ORDER BY created_at DESC, id DESC
        LIMIT @max::integer
    ) AS page
    WINDOW w AS (ORDER BY page.created_at DESC, page.id DESC ROWS UNBOUNDED PRECEDING)
) AS sized
JOIN jobs ON jobs.id = sized.id
WHERE sized.prev_start_bytes < @max_bytes::bigint
ORDER BY jobs.created_at DESC, jobs.id DESC;
