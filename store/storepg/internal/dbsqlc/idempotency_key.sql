-- name: IdempotencyKeyDeleteExpired :execrows
-- Frees at most @max expired keys. SKIP LOCKED lets concurrent sweeps share
-- the work instead of queueing on each other's rows.
DELETE FROM idempotency_keys
WHERE (tenant, method, idem_key) IN (
    SELECT tenant, method, idem_key
    FROM idempotency_keys
    WHERE created_at < @created_before::timestamptz
    ORDER BY created_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
);
