-- 0005_billed_once: a provider bills a provider key once, so a job's usage
-- counts it once, however many workers journal an answer under it (a worker
-- that lost its lease still journals what it saw).
CREATE UNIQUE INDEX llm_attempts_billed_once ON llm_attempts (job_id, provider_key) WHERE billed;
