-- name: JobEventList :many
SELECT job_events.*
FROM job_events
JOIN jobs ON jobs.id = job_events.job_id
WHERE jobs.tenant = @tenant::text
    AND job_events.job_id = @job_id::uuid
    AND job_events.seq > @after_seq::integer
ORDER BY job_events.seq
LIMIT @max::integer;

-- name: JobExists :one
SELECT EXISTS (SELECT 1 FROM jobs WHERE tenant = @tenant::text AND id = @id::uuid);
