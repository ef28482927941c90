-- 0016_run_provider_batch: a run whose items go through the provider's
-- batch API (CreateRunRequest.provider_batch). See docs/architecture.md,
-- "Provider batches".
ALTER TABLE runs ADD COLUMN provider_batch INTEGER NOT NULL DEFAULT 0 CHECK (provider_batch IN (0, 1));
