-- 0031_job_index_entries: a job's insert writes one index entry less
-- (issue 33; docs/performance.md, "The cost of a job"; docs/architecture.md,
-- "Schema trades").
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

-- The running jobs by id. JobPublishMany and JobHeartbeatMany find their
-- batch's rows among the running jobs: counting 100 rows for
-- jsonb_to_recordset (or unnest), the planner reads the running jobs
-- through a partial index that holds only them rather than looking up 100
-- ids, and on a table whose statistics call it small this index (before,
-- jobs_active_status_pipeline_idx) is what keeps it off a sequential scan
-- (TestGenericPlanTrap). Through jobs_claimable_idx it would read every
-- unfinished job. A claim writes an entry here where it wrote one in
-- jobs_active_status_pipeline_idx; a queued job has none.
CREATE INDEX jobs_running_idx ON jobs (id) WHERE status = 'running';
