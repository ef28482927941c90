-- 0013_api_keys: API keys kept in the store (oncejob keys create|list|revoke)
-- and who made an operator's event. See docs/operations.md, "API keys and
-- limits".

-- An API key is ojk_<id>_<secret>. The id finds the row and is shown (the
-- prefix, ojk_<id>); only the sha256 of the whole key is kept, compared in
-- constant time. A revoked key stays, for the audit trail of its events.
CREATE TABLE api_keys (
    id           text        PRIMARY KEY,
    tenant       text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('submitter', 'operator')),
    name         text        NOT NULL DEFAULT '',
    sha256       text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    last_used_at timestamptz
);

CREATE INDEX api_keys_tenant_created_idx ON api_keys (tenant, created_at DESC, id);

-- The caller of the operator RPC that made an event (its audit record):
-- the key's display prefix, its role and the RPC. Empty on events a worker
-- or a submit made.
ALTER TABLE job_events
    ADD COLUMN actor_key  text NOT NULL DEFAULT '',
    ADD COLUMN actor_role text NOT NULL DEFAULT '',
    ADD COLUMN actor_rpc  text NOT NULL DEFAULT '';
