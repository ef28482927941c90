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
-- as JobEventTail: at most @max, and past the first no more than
-- @max_bytes of their rows (the job's params, labels, output and error and
-- the event's message, as text, plus 256 a row), so that a read of large
-- jobs holds a bounded amount. Sizes are taken of the first @max rows
-- only; the rows themselves are read once, for the page.
SELECT sqlc.embed(job_events), sqlc.embed(jobs), sized.bytes::bigint AS bytes
FROM (
    SELECT page.tx, page.id, page.bytes,
        sum(page.bytes) OVER (ORDER BY page.tx, page.id ROWS UNBOUNDED PRECEDING) AS end_bytes
    FROM (
        SELECT job_events.tx, job_events.id,
            octet_length(jobs.params::text) + octet_length(jobs.labels::text)
                + coalesce(octet_length(jobs.output::text), 0) + coalesce(octet_length(jobs.error::text), 0)
                + octet_length(job_events.message) + 256 AS bytes
        FROM job_events
        JOIN jobs ON jobs.id = job_events.job_id
        WHERE job_events.tenant = @tenant::text
            AND (job_events.tx, job_events.id) > (@after_tx::bigint, @after_id::bigint)
            AND job_events.tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
            AND (sqlc.narg(status)::text IS NULL OR job_events.status = sqlc.narg(status)::text)
            AND (sqlc.narg(pipeline)::text IS NULL OR jobs.pipeline = sqlc.narg(pipeline)::text)
        ORDER BY job_events.tx, job_events.id
        LIMIT @max::integer
    ) AS page
) AS sized
JOIN job_events ON job_events.tx = sized.tx AND job_events.id = sized.id
JOIN jobs ON jobs.id = job_events.job_id
WHERE sized.end_bytes - sized.bytes < @max_bytes::bigint
ORDER BY job_events.tx, job_events.id;

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
