-- 0013_api_keys: API keys kept in the store (oncejob keys create|list|revoke)
-- and who made an operator's event; as migrations/postgres/0013_api_keys.
-- Times are unix microseconds, as everywhere in this store.

CREATE TABLE api_keys (
    id           TEXT    PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    role         TEXT    NOT NULL CHECK (role IN ('submitter', 'operator')),
    name         TEXT    NOT NULL DEFAULT '',
    sha256       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
) STRICT;

CREATE INDEX api_keys_tenant_created_idx ON api_keys (tenant, created_at DESC, id);

ALTER TABLE job_events ADD COLUMN actor_key  TEXT NOT NULL DEFAULT '';
ALTER TABLE job_events ADD COLUMN actor_role TEXT NOT NULL DEFAULT '';
ALTER TABLE job_events ADD COLUMN actor_rpc  TEXT NOT NULL DEFAULT '';
