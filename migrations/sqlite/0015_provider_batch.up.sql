-- 0015_provider_batch: the price class of each journaled LLM call. See
-- docs/architecture.md, "Provider batches".

-- 'online' for a call answered by the provider's online API, 'batch' for a
-- line of a provider batch, billed at the batch price (cost_micros is that
-- price).
ALTER TABLE llm_attempts ADD COLUMN price_class text NOT NULL DEFAULT 'online'
    CHECK (price_class IN ('online', 'batch'));
