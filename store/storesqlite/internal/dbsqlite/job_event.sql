-- name: JobEventAppend :execrows
-- Appends the state a job has just moved to as its event last_event_seq,
-- stamped with the job's updated_at. Run in the transaction of the move.
-- SQLite assigns the event's id, its place in the change order (see
-- migrations/sqlite/0003_watch.up.sql). A job that moved to wait
-- (retry_wait, outcome_unknown) carries its next try.
INSERT INTO job_events (job_id, seq, status, stage, attempt, message, created_at, tenant, next_attempt_at)
SELECT jobs.id, jobs.last_event_seq, jobs.status, jobs.stage, jobs.attempt, @message,
    jobs.updated_at, jobs.tenant,
    CASE WHEN jobs.status IN ('retry_wait', 'outcome_unknown') THEN jobs.run_after END
FROM jobs
WHERE jobs.id = @job_id;

-- name: JobEventList :many
SELECT job_events.*
FROM job_events
JOIN jobs ON jobs.id = job_events.job_id
WHERE jobs.tenant = @tenant
    AND job_events.job_id = @job_id
    AND job_events.seq > @after_seq
ORDER BY job_events.seq
LIMIT @max;

-- name: JobExists :one
SELECT EXISTS (SELECT 1 FROM jobs WHERE tenant = @tenant AND id = @id);
