-- name: IdempotencyKeyDeleteExpired :execrows
-- Frees at most @max expired keys, in no particular order: the BRIN index
-- on created_at (migration 0021) finds the block ranges that hold expired
-- keys, and without an ORDER BY the scan stops at @max instead of sorting
-- every expired key. SKIP LOCKED lets concurrent sweeps share the work
-- instead of queueing on each other's rows.
DELETE FROM idempotency_keys
WHERE (tenant, method, idem_key) IN (
    SELECT tenant, method, idem_key
    FROM idempotency_keys
    WHERE created_at < @created_before::timestamptz
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
);
