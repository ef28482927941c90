-- 0017_run_provider_batch: a run whose items go through the provider's
-- batch API (CreateRunRequest.provider_batch). See docs/architecture.md,
-- "Provider batches".
ALTER TABLE runs ADD COLUMN provider_batch boolean NOT NULL DEFAULT false;

-- The provider batches the workers sent, as the worker following each last
-- saw it (status validating, in_progress, finalizing, completed, expired,
-- cancelling, cancelled, failed), by the tag every member's intent row in
-- llm_attempts names ("provider batch <tag>"). A batch may carry the calls
-- of many tenants: it is read only through a run's intent rows
-- (RunBatchList), never listed on its own.
CREATE TABLE provider_batches (
    tag        text        PRIMARY KEY,
    batch_id   text        NOT NULL,
    status     text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
