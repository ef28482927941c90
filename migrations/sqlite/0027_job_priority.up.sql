-- 0027_job_priority: what the provider limits' fair queue needs to know of
-- a job, and a waiting job's next try as a field (docs/architecture.md,
-- "Provider limits"). As migrations/postgres/0027_job_priority.up.sql;
-- times in microseconds.
ALTER TABLE jobs ADD COLUMN run_id TEXT;
ALTER TABLE jobs ADD COLUMN priority TEXT CHECK (priority = 'batch');
ALTER TABLE job_events ADD COLUMN next_attempt_at INTEGER;
