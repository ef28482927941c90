-- 0007_bill_identity: a bill is identified by the provider's request id, and
-- by the provider key only when the provider sent no request id. A provider
-- that honours idempotency keys answers a retry with the original request
-- id, so the bill still counts once; one that does not (OpenAI) bills a
-- retry again under a new request id, and the job's usage must count both.
DROP INDEX llm_attempts_billed_once;
CREATE UNIQUE INDEX llm_attempts_billed_once ON llm_attempts (job_id,
    (CASE WHEN provider_request_id <> '' THEN 'req:' || provider_request_id ELSE 'key:' || provider_key END))
    WHERE billed;
