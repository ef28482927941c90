-- 0017_run_provider_batch: a run whose items go through the provider's
-- batch API (CreateRunRequest.provider_batch). See docs/architecture.md,
-- "Provider batches".
ALTER TABLE runs ADD COLUMN provider_batch INTEGER NOT NULL DEFAULT 0 CHECK (provider_batch IN (0, 1));

-- The provider batches the workers sent, as the worker following each last
-- saw it (status validating, in_progress, finalizing, completed, expired,
-- cancelling, cancelled, failed), by the tag every member's intent row in
-- llm_attempts names ("provider batch <tag>"). A batch may carry the calls
-- of many tenants: it is read only through a run's intent rows
-- (RunBatchList), never listed on its own. Times in microseconds.
CREATE TABLE provider_batches (
    tag        TEXT    PRIMARY KEY,
    batch_id   TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    updated_at INTEGER NOT NULL
) STRICT;
