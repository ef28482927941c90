-- 0031_job_index_entries: one index of jobs fewer, so a job's insert and
-- its claim, whose row versions are not heap-only (status is indexed),
-- each write one index entry less (issue 33; docs/performance.md, "The
-- cost of a job"; docs/architecture.md, "Schema trades").
--
-- jobs_active_status_pipeline_idx (0014), read by the scrape-time gauge
-- alone (JobStatsActive), held the unfinished jobs by status and pipeline;
-- jobs_claimable_idx held four of its five statuses. The claimable index
-- now holds all five and carries status and pipeline, so the gauge is an
-- index-only scan of it. An awaiting_approval job is never claimed: its key
-- is NULL, like an outcome_unknown job's without run_after, which no
-- claim's range scan (key <= now) reaches. The expression stays identical
-- to JobClaim's and JobStatsClaimable's (internal/dbsqlc/engine.sql,
-- view.sql). Supersedes 0004's index of the same name.
DROP INDEX jobs_active_status_pipeline_idx;
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON jobs ((
    CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        WHEN status = 'awaiting_approval' THEN NULL
        ELSE coalesce(run_after, created_at) END
)) INCLUDE (status, pipeline)
WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown', 'awaiting_approval');
