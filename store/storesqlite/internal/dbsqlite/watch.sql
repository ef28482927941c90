-- name: JobEventLastID :one
-- The end of the log: every event committed later has a greater id.
SELECT CAST(coalesce(max(id), 0) AS INTEGER) AS id
FROM job_events;

-- name: JobEventTail :many
-- Events of every tenant after an id, in id (commit) order.
SELECT tenant, job_id, seq, id
FROM job_events
WHERE id > @after_id
ORDER BY id
LIMIT @max;

-- name: JobChangeList :many
-- The tenant's events after an id with their jobs. An empty filter keeps
-- every event.
SELECT sqlc.embed(job_events), sqlc.embed(jobs)
FROM job_events
JOIN jobs ON jobs.id = job_events.job_id
WHERE job_events.tenant = @tenant
    AND job_events.id > @after_id
    AND (job_events.status = @status OR @status = '')
    AND (jobs.pipeline = @pipeline OR @pipeline = '')
ORDER BY job_events.id
LIMIT @max;
