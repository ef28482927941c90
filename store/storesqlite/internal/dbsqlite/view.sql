-- name: JobCountByStatus :many
-- The tenant's jobs per status. An empty pipeline counts every pipeline.
SELECT status, count(*) AS count
FROM jobs
WHERE tenant = @tenant
    AND (pipeline = @pipeline OR @pipeline = '')
GROUP BY status;
