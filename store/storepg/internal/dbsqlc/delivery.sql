-- name: OutboxRouteBatch :many
-- Reads the oldest unrouted events (the queue outbox_unrouted, in id
-- order), up to @max, of the partitions of the outbox (a hash of the job
-- id; the number of partitions is a power of two) this transaction locked:
-- their list, comma-separated, is the transaction's setting
-- oncejob.route_partitions, set by the statement that took the locks before
-- this one (routeLock in delivery_route.go). In its own statement, so its
-- snapshot is taken with the locks held: a routing that held one of them
-- before has committed, and its events are out of the queue; read in the
-- locking statement's snapshot, they read unrouted and were routed again.
-- No partition: no row. A job's events are written one transaction after
-- another (each holds the job's row lock), so a later event is never
-- visible before an earlier one. Each event comes with the sinks its job
-- has a pending delivery to, and every disabled sink.
SELECT sqlc.embed(o),
    ARRAY(SELECT DISTINCT d.sink FROM deliveries d
        WHERE d.job_id = o.job_id AND d.status = 'pending')::text[] AS pending_sinks,
    ARRAY(SELECT s.sink FROM sink_states s)::text[] AS disabled_sinks
FROM outbox_unrouted u
    JOIN outbox o ON o.id = u.id
WHERE current_setting('oncejob.route_partitions', true) <> ''
    AND (hashtext(u.job_id::text) & (sqlc.arg(partitions)::integer - 1)) = ANY(
        string_to_array(current_setting('oncejob.route_partitions', true), ',')::integer[])
ORDER BY u.id
LIMIT @max::integer;

-- name: OutboxRouteWrite :exec
-- A routing's writes in one statement: each delivery inserted once, in its
-- status - pending and due now (attempt 0: not attempted), or as its
-- routing attempt left it (a landed attempt recorded in its landed column)
-- - the journal rows of the attempts that did not land, and the events
-- taken out of the routing queue (outbox_unrouted; the outbox rows are not
-- written). The deliveries come as arrays (unnest: no parsing); the journal
-- rows, rare, as JSON. No ON CONFLICT: an event is routed once (its
-- partition's lock, and its queue row deleted in the same transaction as
-- its deliveries are inserted), so deliveries_outbox_sink_key is a guard
-- that fails the routing should that ever not hold, and a speculative
-- insertion would cost each delivery one more WAL record (its confirm).
WITH r AS (
    SELECT unnest(@outbox_ids::bigint[]) AS outbox_id,
        unnest(@event_ids::text[]) AS event_id,
        unnest(@event_types::text[]) AS event_type,
        unnest(@tenants::text[]) AS tenant,
        unnest(@job_ids::uuid[]) AS job_id,
        unnest(@sinks::text[]) AS sink,
        unnest(@statuses::text[]) AS status,
        unnest(@attempts::integer[]) AS attempt,
        unnest(@due_ats::timestamptz[]) AS due_at,
        unnest(@outcomes::text[]) AS outcome,
        unnest(@errors::text[]) AS error,
        unnest(@external_refs::text[]) AS external_ref,
        unnest(@landed::text[]) AS landed
),
ins AS (
    INSERT INTO deliveries (outbox_id, event_id, event_type, sink, tenant, job_id, status,
        attempt, attempts, due_at, last_outcome, last_error, external_ref, delivered_at, landed)
    SELECT r.outbox_id, r.event_id, r.event_type, r.sink, r.tenant, r.job_id, r.status,
        r.attempt, r.attempt,
        CASE WHEN r.status = 'pending' AND r.attempt > 0 THEN r.due_at ELSE now() END,
        r.outcome, r.error, r.external_ref,
        CASE WHEN r.status = 'delivered' THEN now() END, r.landed
    FROM r
    ORDER BY r.outbox_id
    RETURNING id, outbox_id, event_id, sink, tenant
),
journal AS (
    INSERT INTO delivery_attempts (delivery_id, event_id, sink, tenant, attempt, relay,
        outcome, http_status, error, external_ref, duplicate, started_at, finished_at, latency_ms)
    SELECT ins.id, ins.event_id, ins.sink, ins.tenant, 1, @owner::text,
        j.outcome, j.http_status, j.error, j.external_ref, j.duplicate, j.started_at,
        j.finished_at, j.latency_ms
    FROM jsonb_to_recordset(@journal::jsonb) AS j(
            outbox_id bigint, sink text, outcome text, http_status integer, error text,
            external_ref text, duplicate boolean, started_at timestamptz,
            finished_at timestamptz, latency_ms bigint)
        JOIN ins ON ins.outbox_id = j.outbox_id AND ins.sink = j.sink
)
DELETE FROM outbox_unrouted
WHERE id = ANY(@routed_ids::bigint[]);

-- name: DeliveryLanded :one
SELECT id, event_id, sink, tenant, landed FROM deliveries
WHERE id = @id::bigint;

-- name: OutboxUnroutedList :many
SELECT o.* FROM outbox_unrouted u
    JOIN outbox o ON o.id = u.id
WHERE o.created_at < @created_before::timestamptz
ORDER BY u.id
LIMIT @max::integer;

-- name: DeliveryClaim :many
-- Claims due deliveries in one statement, as JobClaim claims jobs: the scan
-- walks deliveries_due_idx and locks rows as LIMIT takes them, skipping rows
-- another relay holds. A delivery waits while an earlier delivery of its job
-- to its sink is pending (that one is due later, or held by a relay), so per
-- job and sink events go out in order; a disabled sink's deliveries wait.
WITH candidate AS (
    SELECT d.id
    FROM deliveries d
    WHERE d.status = 'pending'
        AND d.due_at <= now()
        AND d.sink = ANY(@sinks::text[])
        AND NOT EXISTS (SELECT 1 FROM sink_states s WHERE s.sink = d.sink)
        AND NOT EXISTS (
            SELECT 1 FROM deliveries e
            WHERE e.job_id = d.job_id AND e.sink = d.sink
                AND e.status = 'pending' AND e.outbox_id < d.outbox_id)
    ORDER BY d.due_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE deliveries d
SET lease_owner = @owner::text,
    attempt = d.attempt + 1,
    attempts = d.attempts + 1,
    due_at = now() + @lease_duration::interval,
    updated_at = now()
FROM candidate, outbox o
WHERE d.id = candidate.id AND o.id = d.outbox_id
RETURNING d.*, o.payload, o.created_at AS event_created_at;

-- name: DeliverySettle :many
-- Journals every result and settles, fenced, the deliveries whose lease the
-- caller still holds, in one statement. Returns the ids settled.
WITH journal AS (
    INSERT INTO delivery_attempts (delivery_id, event_id, sink, tenant, attempt, relay,
        outcome, http_status, error, external_ref, duplicate, started_at, finished_at, latency_ms)
    SELECT r.delivery_id, r.event_id, r.sink, r.tenant, r.attempt, @owner::text,
        r.outcome, r.http_status, r.error, r.external_ref, r.duplicate, r.started_at,
        r.finished_at, r.latency_ms
    FROM jsonb_to_recordset(@results::jsonb) AS r(
        delivery_id bigint, event_id text, sink text, tenant text, attempt integer,
        outcome text, status text, due_at timestamptz, http_status integer, error text,
        external_ref text, duplicate boolean, started_at timestamptz,
        finished_at timestamptz, latency_ms bigint)
),
settled AS (
    UPDATE deliveries d
    SET status = r.status,
        due_at = CASE WHEN r.status = 'pending' THEN r.due_at ELSE d.due_at END,
        lease_owner = NULL,
        last_outcome = r.outcome,
        last_error = r.error,
        external_ref = CASE WHEN r.external_ref <> '' THEN r.external_ref ELSE d.external_ref END,
        delivered_at = CASE WHEN r.status = 'delivered' THEN now() ELSE d.delivered_at END,
        updated_at = now()
    FROM jsonb_to_recordset(@results::jsonb) AS r(
        delivery_id bigint, event_id text, sink text, tenant text, attempt integer,
        outcome text, status text, due_at timestamptz, http_status integer, error text,
        external_ref text, duplicate boolean, started_at timestamptz,
        finished_at timestamptz, latency_ms bigint)
    WHERE d.id = r.delivery_id
        AND d.lease_owner = @owner::text
        AND d.attempt = r.attempt
        AND d.status = 'pending'
    RETURNING d.id
)
SELECT id FROM settled;

-- name: DeliveryList :many
-- Dead letters first, then pending, then delivered; newest first in each.
-- A job's deliveries are found through its events (outbox_job_event_key,
-- then deliveries_outbox_sink_key): no index of deliveries by job (one
-- index entry less a delivery, migration 0033).
SELECT * FROM deliveries
WHERE (@all_tenants::boolean OR tenant = @tenant::text)
    AND (sqlc.narg(job_id)::uuid IS NULL OR (job_id = sqlc.narg(job_id)::uuid
        AND outbox_id = ANY(ARRAY(SELECT o.id FROM outbox o WHERE o.job_id = sqlc.narg(job_id)::uuid))))
    AND (@status::text = '' OR status = @status::text)
    AND (@sink::text = '' OR sink = @sink::text)
    AND (@last_outcome::text = '' OR last_outcome = @last_outcome::text)
    AND (sqlc.narg(created_before)::timestamptz IS NULL OR created_at < sqlc.narg(created_before)::timestamptz)
    AND ((CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END) > @after_rank::integer
        OR ((CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END) = @after_rank::integer
            AND id < @after_id::bigint))
ORDER BY (CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END), id DESC
LIMIT @max::integer;

-- name: DeliveryGetForUpdate :one
SELECT * FROM deliveries
WHERE tenant = @tenant::text AND id = @id::bigint
FOR UPDATE;

-- name: DeliveryRequeue :many
-- Queues dead-lettered deliveries again, due now, with a fresh budget: one
-- (@id) or every one of a sink (@sink).
UPDATE deliveries
SET status = 'pending',
    due_at = now(),
    attempts = 0,
    budget_started_at = now(),
    lease_owner = NULL,
    updated_at = now()
WHERE tenant = @tenant::text
    AND (status = 'dead_lettered' OR (@redeliver::boolean AND status = 'delivered'))
    AND (@id::bigint = 0 OR id = @id::bigint)
    AND (@sink::text = '' OR sink = @sink::text)
RETURNING *;

-- name: SinkEnable :execrows
DELETE FROM sink_states
WHERE tenant = @tenant::text AND sink = @sink::text;

-- name: DeliveryAttemptList :many
SELECT * FROM delivery_attempts
WHERE delivery_id = @delivery_id::bigint
ORDER BY id;

-- name: SinkDisable :exec
INSERT INTO sink_states (sink, tenant, reason)
VALUES (@sink::text, @tenant::text, @reason::text)
ON CONFLICT (sink) DO NOTHING;

-- name: SinkStateList :many
SELECT * FROM sink_states
WHERE tenant = @tenant::text
ORDER BY sink;

-- name: SentMessageGet :one
SELECT * FROM sent_messages
WHERE sink = @sink::text
    AND content_hash = @content_hash::text
    AND sent_at >= @sent_after::timestamptz;

-- name: SentMessageRecord :exec
INSERT INTO sent_messages (sink, content_hash, event_id, external_ref)
VALUES (@sink::text, @content_hash::text, @event_id::text, @external_ref::text)
ON CONFLICT (sink, content_hash) DO UPDATE
SET event_id = excluded.event_id,
    external_ref = excluded.external_ref,
    sent_at = now();
