-- 0023_provider_limits: the embedded store paces its one process in
-- memory (store.ProviderLimitMemory); no table. The number is kept so both
-- dialects have the same versions (docs/architecture.md, "Provider limits").
SELECT 1;
