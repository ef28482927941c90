-- name: JobCountByStatus :many
-- The tenant's jobs per status, from jobs_tenant_status_created_idx (or the
-- pipeline index when filtered).
SELECT status, count(*) AS count
FROM jobs
WHERE tenant = @tenant::text
    AND (sqlc.narg(pipeline)::text IS NULL OR pipeline = sqlc.narg(pipeline)::text)
GROUP BY status;
