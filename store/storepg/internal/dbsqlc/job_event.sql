-- name: JobEventList :many
-- Every event carries its job's tenant, so no join is needed to scope it.
SELECT job_events.*
FROM job_events
WHERE job_events.tenant = @tenant::text
    AND job_events.job_id = @job_id::uuid
    AND job_events.seq > @after_seq::integer
ORDER BY job_events.seq
LIMIT @max::integer;

-- name: JobExists :one
SELECT EXISTS (SELECT 1 FROM jobs WHERE tenant = @tenant::text AND id = @id::uuid);
