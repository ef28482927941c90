-- 0016_server_secrets: secrets every server replica of one store shares,
-- such as the key page tokens are signed with. See docs/architecture.md,
-- "Page tokens".

-- A secret is made once, by the first replica to ask for it (insert if
-- absent, then read), and never changed by the server; deleting a row
-- rotates it at the next start, invalidating what was signed with it.
CREATE TABLE server_secrets (
    name       text        PRIMARY KEY,
    secret     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
