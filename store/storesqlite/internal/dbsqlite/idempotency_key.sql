-- name: IdempotencyKeyInsert :execrows
-- Binds a new key to the job it is about to create. It affects no row when
-- the key exists.
INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id, created_at)
VALUES (@tenant, @method, @idem_key, @fingerprint, @job_id, @created_at)
ON CONFLICT DO NOTHING;

-- name: IdempotencyKeyDeleteExpired :execrows
-- Frees at most @max expired keys, oldest first. (SQLite's DELETE ... LIMIT
-- is a compile-time option, hence the subquery.)
DELETE FROM idempotency_keys
WHERE rowid IN (
    SELECT expired.rowid
    FROM idempotency_keys AS expired
    WHERE expired.created_at < @created_before
    ORDER BY expired.created_at
    LIMIT @max
);
