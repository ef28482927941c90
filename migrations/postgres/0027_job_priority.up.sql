-- 0027_job_priority: what the provider limits' fair queue needs to know of
-- a job, and a waiting job's next try as a field (docs/architecture.md,
-- "Provider limits").
--
-- run_id: the run whose item created the job (run_items says every run that
-- holds it; this is the one whose calls it is fair with). priority: 'batch',
-- or NULL for interactive (SubmitJobRequest.priority; a run's items are
-- batch unless asked otherwise), so a single job's row is no byte longer:
-- each of its versions is written three times (claim, answer, publish).
-- Jobs of before are interactive, outside a run, as the pacer treated
-- them. Both are NULL by default, so adding them rewrites no row.
ALTER TABLE jobs
    ADD COLUMN run_id uuid,
    ADD COLUMN priority text;
-- NOT VALID: the rows of before are NULL, and checking them would scan the
-- table under its lock.
ALTER TABLE jobs ADD CONSTRAINT jobs_priority_check CHECK (priority = 'batch') NOT VALID;

-- next_attempt_at: the job's run_after as the event set it (RETRY_WAIT,
-- OUTCOME_UNKNOWN), so a watcher sees when the job is tried next.
ALTER TABLE job_events ADD COLUMN next_attempt_at timestamptz;
