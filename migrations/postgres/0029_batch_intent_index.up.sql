-- 0029_batch_intent_index: the intent rows of provider batches by the tag
-- they name ("provider batch <tag>"), so that a batch's follower finds the
-- jobs of its lines in one read when it decides whether every one of them
-- was cancelled (ProviderBatchJobs). Partial: only intent rows have an
-- entry, so an online call writes none. See docs/architecture.md,
-- "Provider batches".
CREATE INDEX llm_attempts_batch_intent_idx ON llm_attempts (error)
    WHERE outcome = 'outcome_unknown' AND substr(error, 1, 15) = 'provider batch ';
