-- The relay's queries: routing, claims, settles, retries. Writes run one at a
-- time on the single writer, so a routing or claiming transaction needs no
-- lock of its own, and a fence checked by an UPDATE holds until commit.

-- name: OutboxUnroutedBatch :many
SELECT * FROM outbox
WHERE routed_at IS NULL
ORDER BY id
LIMIT @max;

-- name: DeliveryInsertMany :exec
-- One pending delivery, due now, per [outbox id, sink] of @pairs (a JSON
-- array), in the pairs' order; a (event, sink) pair that exists is left
-- alone. (WHERE true: SQLite's upsert after a SELECT needs it.)
INSERT INTO deliveries (outbox_id, event_id, event_type, sink, tenant, job_id,
    due_at, budget_started_at, created_at, updated_at)
SELECT o.id, o.event_id, o.event_type, json_extract(p.value, '$[1]'), o.tenant, o.job_id,
    @now, @now, @now, @now
FROM json_each(CAST(@pairs AS TEXT)) AS p
JOIN outbox o ON o.id = json_extract(p.value, '$[0]')
WHERE true
ORDER BY p.key
ON CONFLICT (event_id, sink) DO NOTHING;

-- name: OutboxMarkRoutedMany :exec
-- @ids is a JSON array of outbox ids.
UPDATE outbox SET routed_at = @now
WHERE id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));

-- name: OutboxUnroutedList :many
SELECT * FROM outbox
WHERE routed_at IS NULL AND created_at < @created_before
ORDER BY id
LIMIT @max;

-- name: DeliveryClaimCandidates :many
-- Due deliveries in due order, as DeliveryClaim on Postgres chooses them: a
-- delivery waits while an earlier one of its job to its sink is pending, or
-- while its sink is disabled. @sinks is a JSON array (json_each, as in
-- operator.sql: never sqlc.slice, whose expansion shifts the numbered
-- parameters after it).
SELECT d.id
FROM deliveries d
WHERE d.status = 'pending'
    AND d.due_at <= CAST(@now AS INTEGER)
    AND d.sink IN (SELECT value FROM json_each(CAST(@sinks AS TEXT)))
    AND NOT EXISTS (SELECT 1 FROM sink_states s WHERE s.sink = d.sink)
    AND NOT EXISTS (
        SELECT 1 FROM deliveries e
        WHERE e.job_id = d.job_id AND e.sink = d.sink
            AND e.status = 'pending' AND e.outbox_id < d.outbox_id)
ORDER BY d.due_at
LIMIT @max;

-- name: DeliveryClaimMany :many
-- Claims the deliveries of @ids (a JSON array, DeliveryClaimCandidates').
UPDATE deliveries
SET lease_owner = @owner,
    attempt = attempt + 1,
    attempts = attempts + 1,
    due_at = @lease_until,
    updated_at = @now
WHERE id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)))
RETURNING *;

-- name: OutboxPayloads :many
-- The payloads of the events of @ids (a JSON array of outbox ids).
SELECT id, payload, created_at FROM outbox
WHERE id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));

-- name: DeliveryAttemptInsertMany :exec
-- Journals the attempts of @results, a JSON array of [delivery_id,
-- event_id, sink, tenant, attempt, outcome, http_status, error,
-- external_ref, duplicate, started_at, finished_at, latency_ms], in their
-- order.
INSERT INTO delivery_attempts (delivery_id, event_id, sink, tenant, attempt, relay,
    outcome, http_status, error, external_ref, duplicate, started_at, finished_at, latency_ms)
SELECT json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'),
    json_extract(r.value, '$[3]'), json_extract(r.value, '$[4]'), @relay,
    json_extract(r.value, '$[5]'), json_extract(r.value, '$[6]'), json_extract(r.value, '$[7]'),
    json_extract(r.value, '$[8]'), json_extract(r.value, '$[9]'), json_extract(r.value, '$[10]'),
    json_extract(r.value, '$[11]'), json_extract(r.value, '$[12]')
FROM json_each(CAST(@results AS TEXT)) AS r
ORDER BY r.key;

-- name: DeliverySettle :execrows
-- Settles one delivery while the caller still holds its lease. One
-- statement a delivery, unlike the journal's: sqlc's SQLite parser takes no
-- UPDATE ... FROM, and a column set from a subquery over a JSON array
-- parses the array once a row.
UPDATE deliveries
SET status = CAST(@status AS TEXT),
    due_at = CASE WHEN CAST(@status AS TEXT) = 'pending' THEN CAST(@due_at AS INTEGER) ELSE due_at END,
    lease_owner = NULL,
    last_outcome = @outcome,
    last_error = @error,
    external_ref = CASE WHEN CAST(@external_ref AS TEXT) <> '' THEN CAST(@external_ref AS TEXT) ELSE external_ref END,
    delivered_at = CASE WHEN CAST(@status AS TEXT) = 'delivered' THEN CAST(@now AS INTEGER) ELSE delivered_at END,
    updated_at = @now
WHERE id = @id
    AND lease_owner = @owner
    AND attempt = @attempt
    AND status = 'pending';

-- name: DeliveryList :many
-- Dead letters first, then pending, then delivered; newest first in each.
SELECT * FROM deliveries
WHERE (CAST(@all_tenants AS BOOLEAN) = 1 OR tenant = @tenant)
    AND (CAST(@job_id AS TEXT) = '' OR job_id = CAST(@job_id AS TEXT))
    AND (CAST(@status AS TEXT) = '' OR status = CAST(@status AS TEXT))
    AND (CAST(@sink AS TEXT) = '' OR sink = CAST(@sink AS TEXT))
    AND (CAST(@last_outcome AS TEXT) = '' OR last_outcome = CAST(@last_outcome AS TEXT))
    AND (CAST(@created_before AS INTEGER) = 0 OR created_at < CAST(@created_before AS INTEGER))
    AND ((CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END) > CAST(@after_rank AS INTEGER)
        OR ((CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END) = CAST(@after_rank AS INTEGER)
            AND id < CAST(@after_id AS INTEGER)))
ORDER BY (CASE status WHEN 'dead_lettered' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END), id DESC
LIMIT @max;

-- name: DeliveryGet :one
SELECT * FROM deliveries
WHERE tenant = @tenant AND id = @id;

-- name: DeliveryRequeue :many
-- Queues dead-lettered deliveries again, due now, with a fresh budget: one
-- (@id) or every one of a sink (@sink).
UPDATE deliveries
SET status = 'pending',
    due_at = @now,
    attempts = 0,
    budget_started_at = @now,
    lease_owner = NULL,
    updated_at = @now
WHERE tenant = @tenant
    AND (status = 'dead_lettered' OR (CAST(@redeliver AS BOOLEAN) = 1 AND status = 'delivered'))
    AND (CAST(@id AS INTEGER) = 0 OR id = CAST(@id AS INTEGER))
    AND (CAST(@sink AS TEXT) = '' OR sink = CAST(@sink AS TEXT))
RETURNING *;

-- name: SinkEnable :execrows
DELETE FROM sink_states
WHERE tenant = @tenant AND sink = @sink;

-- name: DeliveryAttemptList :many
SELECT * FROM delivery_attempts
WHERE delivery_id = @delivery_id
ORDER BY id;

-- name: SinkDisable :exec
INSERT INTO sink_states (sink, tenant, disabled_at, reason)
VALUES (@sink, @tenant, @now, @reason)
ON CONFLICT (sink) DO NOTHING;

-- name: SinkStateList :many
SELECT * FROM sink_states
WHERE tenant = @tenant
ORDER BY sink;

-- name: SentMessageGet :one
SELECT * FROM sent_messages
WHERE sink = @sink
    AND content_hash = @content_hash
    AND sent_at >= CAST(@sent_after AS INTEGER);

-- name: SentMessageRecord :exec
INSERT INTO sent_messages (sink, content_hash, event_id, external_ref, sent_at)
VALUES (@sink, @content_hash, @event_id, @external_ref, @now)
ON CONFLICT (sink, content_hash) DO UPDATE
SET event_id = excluded.event_id,
    external_ref = excluded.external_ref,
    sent_at = excluded.sent_at;
