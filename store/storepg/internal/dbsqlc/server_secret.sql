-- name: ServerSecretInsert :exec
-- Makes the secret unless a replica already did: the first insert wins.
INSERT INTO server_secrets (name, secret)
VALUES (@name::text, @secret::bytea)
ON CONFLICT (name) DO NOTHING;

-- name: ServerSecretGet :one
SELECT secret FROM server_secrets WHERE name = @name::text;
