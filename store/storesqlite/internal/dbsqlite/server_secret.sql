-- name: ServerSecretInsert :exec
-- Makes the secret unless it exists: the first insert wins.
INSERT INTO server_secrets (name, secret, created_at)
VALUES (@name, @secret, @created_at)
ON CONFLICT (name) DO NOTHING;

-- name: ServerSecretGet :one
SELECT secret FROM server_secrets WHERE name = @name;
