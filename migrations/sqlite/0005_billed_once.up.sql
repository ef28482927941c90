-- 0005_billed_once: a provider bills a provider key once, so a job's usage
-- counts it once, however many workers journal an answer under it (a worker
-- that lost its lease still journals what it saw).
--
-- The SQLite twin of postgres/0005_billed_once.up.sql. billed is INTEGER 0
-- or 1, so "WHERE billed" holds for the billed rows as in Postgres. Writes
-- take turns here, and LLMAttemptInsert's check already stores a second bill
-- of a key unbilled; the index makes the rule the schema's, not only the
-- query's.
CREATE UNIQUE INDEX llm_attempts_billed_once ON llm_attempts (job_id, provider_key) WHERE billed;
