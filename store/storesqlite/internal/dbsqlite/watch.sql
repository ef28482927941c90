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
-- every event. At most @max, and past the first no more than @max_bytes of
-- their rows (the job's params, labels, output and error and the event's
-- message, plus 256 a row), so that a read of large jobs holds a bounded
-- amount.
SELECT sqlc.embed(job_events), sqlc.embed(jobs), CAST(sized.bytes AS INTEGER) AS bytes
FROM (
    SELECT page.id, page.bytes,
        sum(page.bytes) OVER (ORDER BY page.id ROWS UNBOUNDED PRECEDING) AS end_bytes
    FROM (
        SELECT job_events.id,
            length(CAST(jobs.params AS BLOB)) + length(CAST(jobs.labels AS BLOB))
                + coalesce(length(CAST(jobs.output AS BLOB)), 0) + coalesce(length(CAST(jobs.error AS BLOB)), 0)
                + length(CAST(job_events.message AS BLOB)) + 256 AS bytes
        FROM job_events
        JOIN jobs ON jobs.id = job_events.job_id
        WHERE job_events.tenant = @tenant
            AND job_events.id > @after_id
            AND (job_events.status = @status OR @status = '')
            AND (jobs.pipeline = @pipeline OR @pipeline = '')
        ORDER BY job_events.id
        LIMIT @max
    ) AS page
) AS sized
JOIN job_events ON job_events.id = sized.id
JOIN jobs ON jobs.id = job_events.job_id
WHERE sized.end_bytes - sized.bytes < CAST(@max_bytes AS INTEGER)
ORDER BY job_events.id;
