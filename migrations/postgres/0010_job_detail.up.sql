-- 0010_job_detail: what a job's detail view shows that was not recorded.
--
-- job_checkpoints.reused_from: the job whose checkpoint of the same stage
-- key the decision cache served; '' when this job computed the result. Rows
-- written before this migration read '' (unknown, shown as computed).
-- llm_attempts.model: the model the call named; '' for older rows.
ALTER TABLE job_checkpoints ADD COLUMN reused_from text NOT NULL DEFAULT '';
ALTER TABLE llm_attempts ADD COLUMN model text NOT NULL DEFAULT '';
