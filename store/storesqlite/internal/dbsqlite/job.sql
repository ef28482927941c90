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
    traceparent, run_id, priority
) VALUES (
    @id, @tenant, @idempotency_key, @dedup_key, @pipeline, @pipeline_version,
    @prompt_version, @model_profile, @status, @stage, @output, @deduplicated_from,
    @document_sha256, @document_media_type, @document_name, @document_size_bytes,
    @params, @labels, @created_at, @updated_at, @finished_at, @created_at,
    @traceparent, @run_id, @priority
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
-- the same, but sqlc mistypes its parameters.) At most @max rows, and of
-- their sizes (params, labels, output and error, plus 256 a row) only the
-- rows that start within @max_bytes and the one after them: the caller
-- cuts the page at the bytes and knows from that one whether a next page
-- exists.
SELECT sqlc.embed(jobs), CAST(sized.bytes AS INTEGER) AS bytes
FROM (
    SELECT page.id, page.bytes,
        sum(page.bytes) OVER w - page.bytes - coalesce(lag(page.bytes) OVER w, 0) AS prev_start_bytes
    FROM (
        SELECT jobs.id, jobs.created_at,
            length(CAST(jobs.params AS BLOB)) + length(CAST(jobs.labels AS BLOB))
                + coalesce(length(CAST(jobs.output AS BLOB)), 0) + coalesce(length(CAST(jobs.error AS BLOB)), 0)
                + 256 AS bytes
        FROM jobs
        WHERE jobs.tenant = @tenant
            AND (jobs.status = @status OR @status = '')
            AND (jobs.pipeline = @pipeline OR @pipeline = '')
            AND (@run_id = '' OR jobs.id IN (SELECT run_items.job_id FROM run_items WHERE run_items.run_id = @run_id))
            AND jobs.created_at <= @after_created_at
            AND (jobs.created_at < @after_created_at OR jobs.id < @after_id)
        ORDER BY jobs.created_at DESC, jobs.id DESC
        LIMIT @max
    ) AS page
    WINDOW w AS (ORDER BY page.created_at DESC, page.id DESC ROWS UNBOUNDED PRECEDING)
) AS sized
JOIN jobs ON jobs.id = sized.id
WHERE sized.prev_start_bytes < CAST(@max_bytes AS INTEGER)
ORDER BY jobs.created_at DESC, jobs.id DESC;

-- name: IdempotencyKeyInsertMany :many
-- Binds every new key of a batch to the job it is about to create, in one
-- statement, and returns the job ids of the keys it inserted: a key that
-- exists inserts nothing. @batch is a JSON array of
-- [tenant, method, idem_key, fingerprint, job_id, created_at], no two with
-- the same key. (WHERE true: SQLite's upsert after a SELECT needs it.)
INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id, created_at)
SELECT json_extract(b.value, '$[0]'), json_extract(b.value, '$[1]'),
    json_extract(b.value, '$[2]'), json_extract(b.value, '$[3]'),
    json_extract(b.value, '$[4]'), json_extract(b.value, '$[5]')
FROM json_each(CAST(@batch AS TEXT)) AS b
WHERE true
ON CONFLICT DO NOTHING
RETURNING job_id;

-- name: DocumentInsertMany :exec
-- Stores the documents of a batch once per tenant and content hash. @batch
-- is a JSON array of [tenant, sha256, media_type, offset, size,
-- created_at]; each document's bytes are @data's size bytes from offset
-- (1-based): the documents side by side in one blob, so their bytes are
-- neither escaped into the JSON nor parsed out of it.
INSERT INTO documents (tenant, sha256, media_type, data, size_bytes, created_at)
SELECT json_extract(b.value, '$[0]'), json_extract(b.value, '$[1]'),
    json_extract(b.value, '$[2]'),
    substr(CAST(@data AS BLOB), json_extract(b.value, '$[3]'), json_extract(b.value, '$[4]')),
    json_extract(b.value, '$[4]'), json_extract(b.value, '$[5]')
FROM json_each(CAST(@batch AS TEXT)) AS b
WHERE true
ON CONFLICT DO NOTHING;

-- name: JobInsertMany :many
-- Inserts the jobs of a batch whose keys were new: queued, or succeeded
-- from the computed success of their dedup key (as JobInsert after
-- JobGetComputedSuccess). @batch is a JSON array of [id, tenant,
-- idempotency_key, dedup_key, pipeline, pipeline_version, prompt_version,
-- model_profile, document_sha256, document_media_type, document_name,
-- document_size_bytes, params, labels, created_at, traceparent, run_id,
-- priority]. The retry budget counts from the job's creation.
INSERT INTO jobs (
    id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
    prompt_version, model_profile, status, stage, output, deduplicated_from,
    document_sha256, document_media_type, document_name, document_size_bytes,
    params, labels, created_at, updated_at, finished_at, budget_started_at,
    traceparent, run_id, priority
)
SELECT json_extract(b.value, '$[0]'), json_extract(b.value, '$[1]'),
    json_extract(b.value, '$[2]'), json_extract(b.value, '$[3]'),
    json_extract(b.value, '$[4]'), json_extract(b.value, '$[5]'),
    json_extract(b.value, '$[6]'), json_extract(b.value, '$[7]'),
    CASE WHEN source.id IS NULL THEN 'queued' ELSE 'succeeded' END,
    CASE WHEN source.id IS NULL THEN 'uploaded' ELSE 'published' END,
    source.output, source.id,
    json_extract(b.value, '$[8]'), json_extract(b.value, '$[9]'),
    json_extract(b.value, '$[10]'), json_extract(b.value, '$[11]'),
    json_extract(b.value, '$[12]'), json_extract(b.value, '$[13]'),
    json_extract(b.value, '$[14]'), json_extract(b.value, '$[14]'),
    CASE WHEN source.id IS NULL THEN NULL ELSE json_extract(b.value, '$[14]') END,
    json_extract(b.value, '$[14]'), json_extract(b.value, '$[15]'),
    json_extract(b.value, '$[16]'), json_extract(b.value, '$[17]')
FROM json_each(CAST(@batch AS TEXT)) AS b
LEFT JOIN jobs AS source ON source.tenant = json_extract(b.value, '$[1]')
    AND source.dedup_key = json_extract(b.value, '$[3]')
    AND source.status = 'succeeded'
    AND source.deduplicated_from IS NULL
ORDER BY b.key
RETURNING *;

-- name: JobEventAppendMany :execrows
-- Appends the first event of each job of a batch, in the batch's order, as
-- JobEventAppend does for one. @batch is a JSON array of [job_id, message].
INSERT INTO job_events (job_id, seq, status, stage, attempt, message, created_at, tenant)
SELECT jobs.id, jobs.last_event_seq, jobs.status, jobs.stage, jobs.attempt,
    json_extract(b.value, '$[1]'), jobs.updated_at, jobs.tenant
FROM json_each(CAST(@batch AS TEXT)) AS b
JOIN jobs ON jobs.id = json_extract(b.value, '$[0]')
ORDER BY b.key;
