-- 0024_provider_batch_bills: the lines each provider batch billed, by
-- provider key, as the batcher read them from the batch's results, so that
-- a run's batches show what the provider billed for its calls beside what
-- the journal applied: a call billed in two batches is counted in both.
-- Read only through a run's intent rows (RunBatchList), like
-- provider_batches. See docs/architecture.md, "Provider batches".
CREATE TABLE provider_batch_bills (
    tag          text NOT NULL,
    provider_key text NOT NULL,
    PRIMARY KEY (tag, provider_key)
);
