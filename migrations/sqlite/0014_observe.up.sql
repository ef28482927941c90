-- 0014_observe: what operators and traces need of the jobs table. See
-- docs/architecture.md, "Metrics and traces".

-- The W3C traceparent of the SubmitJob call that created the job, so the
-- worker's and the relay's spans join the submitter's trace. Empty when the
-- submitter sent none and the server traces nothing.
ALTER TABLE jobs ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';

-- The jobs that are not finished, by status and pipeline: the scrape-time
-- gauge of /metrics (JobStats) counts them from this index alone, however
-- many finished jobs the table holds.
CREATE INDEX jobs_active_status_pipeline_idx ON jobs (status, pipeline)
    WHERE status IN ('queued', 'running', 'retry_wait', 'awaiting_approval', 'outcome_unknown');
