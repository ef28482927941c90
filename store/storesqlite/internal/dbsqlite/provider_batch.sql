-- Provider batches (docs/architecture.md, "Provider batches"): what the
-- batcher saw of each, and a run's view of the batches its calls went into.

-- name: ProviderBatchUpsert :exec
INSERT INTO provider_batches (tag, batch_id, status, created_at, expires_at, updated_at)
VALUES (@tag, @batch_id, @status, @created_at, @expires_at, @updated_at)
ON CONFLICT (tag) DO UPDATE SET batch_id = excluded.batch_id, status = excluded.status,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at;

-- name: ProviderBatchBillsInsert :exec
-- The billed lines of a finished batch (a line billed is recorded once).
INSERT INTO provider_batch_bills (tag, provider_key)
SELECT @tag, value FROM json_each(@provider_keys) WHERE true -- (an upsert's SELECT needs a WHERE in SQLite)
ON CONFLICT DO NOTHING;

-- name: ProviderBatchListStale :many
-- Batches not finished whose record no worker touched since @stale_before.
SELECT tag, batch_id, status FROM provider_batches
WHERE status NOT IN ('completed', 'failed', 'expired', 'cancelled')
    AND updated_at < @stale_before
ORDER BY updated_at
LIMIT @max_batches;

-- name: RunBatchList :many
-- The batches the calls of a run's computed items went into, oldest first
-- (see the Postgres query).
WITH intents AS (
    SELECT a.job_id, a.provider_key, substr(a.error, 16) AS tag,
        row_number() OVER (PARTITION BY a.job_id, a.provider_key ORDER BY a.job_attempt DESC, a.id DESC) AS latest
    FROM run_items ri
    JOIN llm_attempts a ON a.job_id = ri.job_id
    WHERE ri.run_id = @run_id AND ri.tenant = @tenant AND ri.outcome = 'created'
        AND a.outcome = 'outcome_unknown' AND a.error LIKE 'provider batch %'
)
SELECT pb.batch_id, pb.status, pb.created_at, pb.expires_at, pb.updated_at,
    count(DISTINCT i.job_id || ':' || i.provider_key) AS lines,
    count(bill.id) AS answered_lines,
    CAST(coalesce(sum(bill.cost_micros), 0) AS INTEGER) AS cost_micros,
    count(DISTINCT CASE WHEN pbb.tag IS NOT NULL THEN i.job_id || ':' || i.provider_key END) AS billed_lines
FROM intents i
JOIN provider_batches pb ON pb.tag = i.tag
LEFT JOIN provider_batch_bills pbb ON pbb.tag = i.tag AND pbb.provider_key = i.provider_key
LEFT JOIN llm_attempts bill ON i.latest = 1 AND bill.job_id = i.job_id AND bill.provider_key = i.provider_key
    AND bill.billed = 1 AND bill.price_class = 'batch'
GROUP BY pb.tag, pb.batch_id, pb.status, pb.created_at, pb.expires_at, pb.updated_at
ORDER BY pb.created_at, pb.tag;

-- name: ProviderBatchJobs :many
-- The jobs whose intent rows name the batch of @intent, each with its
-- status (see the Postgres query).
SELECT DISTINCT a.job_id, j.status
FROM llm_attempts a
JOIN jobs j ON j.id = a.job_id
WHERE a.outcome = 'outcome_unknown' AND substr(a.error, 1, 15) = 'provider batch '
    AND a.error = @intent;
