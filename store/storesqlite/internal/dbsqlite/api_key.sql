-- name: APIKeyInsert :one
INSERT INTO api_keys (id, tenant, role, name, sha256, created_at)
VALUES (@id, @tenant, @role, @name, @sha256, @created_at)
RETURNING *;

-- name: APIKeyGetByID :one
SELECT * FROM api_keys WHERE id = @id;

-- name: APIKeyList :many
-- One tenant's keys, or every tenant's with an empty tenant; newest first.
SELECT * FROM api_keys
WHERE (CAST(@tenant AS TEXT) = '' OR tenant = @tenant)
    AND (CAST(@include_revoked AS BOOLEAN) = 1 OR revoked_at IS NULL)
ORDER BY created_at DESC, id
LIMIT @max;

-- name: APIKeyRevoke :one
-- Revokes a key once: a revoked key keeps its first revoked_at.
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, @now)
WHERE id = @id
RETURNING *;

-- name: APIKeyTouch :exec
-- Records a use, at most once per every_micros, so authentication writes
-- rarely.
UPDATE api_keys
SET last_used_at = @now
WHERE id = @id
    AND (last_used_at IS NULL OR last_used_at < @now - CAST(@every_micros AS INTEGER));
