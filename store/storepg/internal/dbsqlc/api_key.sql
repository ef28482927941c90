-- name: APIKeyInsert :one
INSERT INTO api_keys (id, tenant, role, name, sha256)
VALUES (@id::text, @tenant::text, @role::text, @name::text, @sha256::text)
RETURNING *;

-- name: APIKeyGetByID :one
SELECT * FROM api_keys WHERE id = @id::text;

-- name: APIKeyList :many
-- One tenant's keys, or every tenant's with an empty tenant; newest first.
SELECT * FROM api_keys
WHERE (@tenant::text = '' OR tenant = @tenant::text)
    AND (@include_revoked::boolean OR revoked_at IS NULL)
ORDER BY created_at DESC, id
LIMIT @max::integer;

-- name: APIKeyRevoke :one
-- Revokes a key once: a revoked key keeps its first revoked_at.
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id::text
RETURNING *;

-- name: APIKeyTouch :exec
-- Records a use, at most once per every, so authentication writes rarely.
UPDATE api_keys
SET last_used_at = now()
WHERE id = @id::text
    AND (last_used_at IS NULL OR last_used_at < now() - @every::interval);
