-- 0007_bill_identity: the SQLite twin of postgres/0007_bill_identity.up.sql:
-- a bill is identified by the provider's request id, by the provider key
-- only when there is none.
DROP INDEX llm_attempts_billed_once;
CREATE UNIQUE INDEX llm_attempts_billed_once ON llm_attempts (job_id,
    (CASE WHEN provider_request_id <> '' THEN 'req:' || provider_request_id ELSE 'key:' || provider_key END))
    WHERE billed;
