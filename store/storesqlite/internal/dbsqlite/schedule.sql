-- Schedules and their slots: the SQLite twin of the Postgres queries (see
-- storepg's schedule.sql). Writes take turns on the single writer, so the
-- schedule's lock is the write transaction itself.

-- name: ScheduleInsert :execrows
INSERT INTO schedules (id, tenant, idem_key, fingerprint, name, cron, interval_ms, time_zone, job,
    overlap, catchup, misfire_ms, next_slot_at, created_at, updated_at)
VALUES (@id, @tenant, @idem_key, @fingerprint, @name, @cron, @interval_ms, @time_zone, @job,
    @overlap, @catchup, @misfire_ms, @next_slot_at, @now, @now)
ON CONFLICT (tenant, idem_key) DO NOTHING;

-- name: ScheduleGetByKey :one
SELECT * FROM schedules WHERE tenant = @tenant AND idem_key = @idem_key;

-- name: ScheduleGetByID :one
SELECT * FROM schedules WHERE tenant = @tenant AND id = @id AND deleted_at IS NULL;

-- name: ScheduleList :many
SELECT * FROM schedules
WHERE tenant = @tenant AND deleted_at IS NULL
    AND created_at <= @after_created_at
    AND (created_at < @after_created_at OR id < @after_id)
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: ScheduleListBasic :many
-- ScheduleList without the templates' documents' text and data: the
-- columns of schedules in their order, so a row converts to Schedule.
SELECT id, tenant, idem_key, fingerprint, name, cron, interval_ms, time_zone,
    CAST(json_remove(job, '$.document.text', '$.document.data') AS TEXT) AS job,
    overlap, catchup, misfire_ms, paused, deleted_at, next_slot_at, last_job_id,
    buffered_slot_at, lease_owner, lease_until, created_at, updated_at
FROM schedules
WHERE tenant = @tenant AND deleted_at IS NULL
    AND created_at <= @after_created_at
    AND (created_at < @after_created_at OR id < @after_id)
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: ScheduleSlotList :many
SELECT * FROM schedule_slots
WHERE schedule_id = @schedule_id
ORDER BY slot_at DESC
LIMIT @max;

-- name: ScheduleSetPaused :one
UPDATE schedules
SET next_slot_at = CASE WHEN paused AND NOT CAST(@paused AS BOOLEAN) THEN @next_slot_at ELSE next_slot_at END,
    buffered_slot_at = CASE WHEN CAST(@paused AS BOOLEAN) THEN NULL ELSE buffered_slot_at END,
    paused = CAST(@paused AS BOOLEAN),
    updated_at = @now
WHERE tenant = @tenant AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: ScheduleDelete :execrows
UPDATE schedules SET deleted_at = @now, lease_owner = NULL, lease_until = NULL, updated_at = @now
WHERE tenant = @tenant AND id = @id AND deleted_at IS NULL;

-- name: ScheduleClaim :many
UPDATE schedules
SET lease_owner = @owner, lease_until = @lease_until
WHERE id IN (
    SELECT due.id FROM schedules AS due
    WHERE due.deleted_at IS NULL AND NOT due.paused
        AND (due.next_slot_at <= @now OR due.buffered_slot_at IS NOT NULL)
        AND (due.lease_until IS NULL OR due.lease_until < @now OR due.lease_owner = @owner)
    ORDER BY due.next_slot_at
    LIMIT @max
)
RETURNING *;

-- name: ScheduleLock :one
SELECT * FROM schedules
WHERE id = @id AND lease_owner = @owner AND deleted_at IS NULL AND NOT paused;

-- name: JobStatusGet :one
SELECT status FROM jobs WHERE id = @id;

-- name: ScheduleSlotInsert :execrows
INSERT INTO schedule_slots (schedule_id, slot_at, tenant, outcome, job_id, reason, decided_at)
VALUES (@schedule_id, @slot_at, @tenant, @outcome, @job_id, @reason, @now)
ON CONFLICT DO NOTHING;

-- name: ScheduleSlotSettle :exec
UPDATE schedule_slots
SET outcome = @outcome, job_id = @job_id, reason = @reason, decided_at = @now
WHERE schedule_id = @schedule_id AND slot_at = @slot_at;

-- name: ScheduleAdvance :exec
UPDATE schedules
SET next_slot_at = max(next_slot_at, @next_slot_at),
    last_job_id = coalesce(@last_job_id, last_job_id),
    buffered_slot_at = @buffered_slot_at,
    updated_at = @now
WHERE id = @id;
