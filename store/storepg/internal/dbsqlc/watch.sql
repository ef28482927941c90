-- name: JobEventChannel :one
-- The NOTIFY channel of the job_events table this connection's search_path
-- finds; JobEventNotify builds the same name.
SELECT left('oncejob_events_' || pg_namespace.nspname::text, 63)::text AS channel
FROM pg_catalog.pg_class
JOIN pg_catalog.pg_namespace ON pg_namespace.oid = pg_class.relnamespace
WHERE pg_class.oid = 'job_events'::regclass;

-- name: JobEventTailStart :one
-- The position of the log's end: every event not yet visible to a snapshot
-- taken now will have tx >= this snapshot's xmin.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS tx;

-- name: JobEventTail :many
-- Events of every tenant after a cursor, in (tx, id) order, only those whose
-- writing transactions (and every transaction before them) have ended: a
-- later commit cannot sort before the last row returned.
SELECT tenant, job_id, seq, tx, id
FROM job_events
WHERE (tx, id) > (@after_tx::bigint, @after_id::bigint)
    AND tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
ORDER BY tx, id
LIMIT @max::integer;

-- name: JobChangeList :many
-- The tenant's events after a cursor with their jobs, under the same rule
-- as JobEventTail.
SELECT sqlc.embed(job_events), sqlc.embed(jobs)
FROM job_events
JOIN jobs ON jobs.id = job_events.job_id
WHERE job_events.tenant = @tenant::text
    AND (job_events.tx, job_events.id) > (@after_tx::bigint, @after_id::bigint)
    AND job_events.tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
    AND (sqlc.narg(status)::text IS NULL OR job_events.status = sqlc.narg(status)::text)
    AND (sqlc.narg(pipeline)::text IS NULL OR jobs.pipeline = sqlc.narg(pipeline)::text)
ORDER BY job_events.tx, job_events.id
LIMIT @max::integer;

-- name: JobEventNotify :exec
-- Announces events that committed, one notification per payload, in one
-- short transaction of its own (see notifier.go).
SELECT pg_notify(channel.name, payload)
FROM (
    SELECT left('oncejob_events_' || pg_namespace.nspname::text, 63)::text AS name
    FROM pg_catalog.pg_class
    JOIN pg_catalog.pg_namespace ON pg_namespace.oid = pg_class.relnamespace
    WHERE pg_class.oid = 'job_events'::regclass
) AS channel,
unnest(@payloads::text[]) AS payload;
