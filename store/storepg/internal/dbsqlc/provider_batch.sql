-- Provider batches (docs/architecture.md, "Provider batches"): what the
-- batcher saw of each, and a run's view of the batches its calls went into.

-- name: ProviderBatchUpsert :exec
INSERT INTO provider_batches (tag, batch_id, status, created_at, expires_at)
VALUES (@tag::text, @batch_id::text, @status::text, @created_at::timestamptz, sqlc.narg(expires_at)::timestamptz)
ON CONFLICT (tag) DO UPDATE SET batch_id = excluded.batch_id, status = excluded.status,
    expires_at = excluded.expires_at, updated_at = now();

-- name: ProviderBatchBillsInsert :exec
-- The billed lines of a finished batch (a line billed is recorded once).
INSERT INTO provider_batch_bills (tag, provider_key)
SELECT @tag::text, unnest(@provider_keys::text[])
ON CONFLICT DO NOTHING;

-- name: ProviderBatchListStale :many
-- Batches not finished whose record no worker touched since @stale_before.
SELECT tag, batch_id, status FROM provider_batches
WHERE status NOT IN ('completed', 'failed', 'expired', 'cancelled')
    AND updated_at < @stale_before::timestamptz
ORDER BY updated_at
LIMIT @max_batches::integer;

-- name: RunBatchList :many
-- The batches the calls of a run's computed items went into, oldest first:
-- per batch the run's calls in it (distinct job and provider key), and
-- those answered by it, with their cost. A call retried into a later batch
-- (its line failed or expired) was answered by the batch of its latest
-- intent (the latest attempt's), so only that intent counts the bill. And
-- the run's lines the provider billed, as read from the batch's results
-- (provider_batch_bills): a call billed by two batches counts in both.
WITH intents AS (
    SELECT a.job_id, a.provider_key, substr(a.error, 16) AS tag,
        row_number() OVER (PARTITION BY a.job_id, a.provider_key ORDER BY a.job_attempt DESC, a.id DESC) AS latest
    FROM run_items ri
    JOIN llm_attempts a ON a.job_id = ri.job_id
    WHERE ri.run_id = @run_id::uuid AND ri.tenant = @tenant::text AND ri.outcome = 'created'
        AND a.outcome = 'outcome_unknown' AND a.error LIKE 'provider batch %'
)
SELECT pb.batch_id, pb.status, pb.created_at, pb.expires_at, pb.updated_at,
    count(DISTINCT i.job_id::text || ':' || i.provider_key)::bigint AS lines,
    count(bill.id)::bigint AS answered_lines,
    coalesce(sum(bill.cost_micros), 0)::bigint AS cost_micros,
    count(DISTINCT CASE WHEN pbb.tag IS NOT NULL THEN i.job_id::text || ':' || i.provider_key END)::bigint AS billed_lines
FROM intents i
JOIN provider_batches pb ON pb.tag = i.tag
LEFT JOIN provider_batch_bills pbb ON pbb.tag = i.tag AND pbb.provider_key = i.provider_key
LEFT JOIN llm_attempts bill ON i.latest = 1 AND bill.job_id = i.job_id AND bill.provider_key = i.provider_key
    AND bill.billed AND bill.price_class = 'batch'
GROUP BY pb.tag, pb.batch_id, pb.status, pb.created_at, pb.expires_at, pb.updated_at
ORDER BY pb.created_at, pb.tag;

-- name: ProviderBatchJobs :many
-- The jobs whose intent rows name the batch of @intent ("provider batch
-- <tag>"), each with its status: every line of the batch belongs to one of
-- them (an intent is journaled before its call is sent). Read through
-- llm_attempts_batch_intent_idx (migration 0029).
SELECT DISTINCT a.job_id, j.status
FROM llm_attempts a
JOIN jobs j ON j.id = a.job_id
WHERE a.outcome = 'outcome_unknown' AND substr(a.error, 1, 15) = 'provider batch '
    AND a.error = @intent::text;
