-- Schedules and their slots (docs/architecture.md, "Schedules"). A
-- scheduler claims due schedules under a lease (ScheduleClaim) and decides
-- each slot in one transaction: the schedule locked and fenced by the lease
-- (ScheduleLock), the slot recorded once (ScheduleSlotInsert: the primary
-- key makes a slot fire at most once), its job submitted with a key derived
-- from the slot, the schedule moved on (ScheduleAdvance).

-- name: ScheduleInsert :one
INSERT INTO schedules (id, tenant, idem_key, fingerprint, name, cron, interval_ms, time_zone, job,
    overlap, catchup, misfire_ms, next_slot_at)
VALUES (@id::uuid, @tenant::text, @idem_key::text, @fingerprint::text, @name::text, @cron::text,
    @interval_ms::bigint, @time_zone::text, @job::jsonb, @overlap::text, @catchup::text,
    @misfire_ms::bigint, @next_slot_at::timestamptz)
ON CONFLICT (tenant, idem_key) DO NOTHING
RETURNING *;

-- name: ScheduleGetByKey :one
SELECT * FROM schedules WHERE tenant = @tenant::text AND idem_key = @idem_key::text;

-- name: ScheduleGetByID :one
SELECT * FROM schedules WHERE tenant = @tenant::text AND id = @id::uuid AND deleted_at IS NULL;

-- name: ScheduleList :many
SELECT * FROM schedules
WHERE tenant = @tenant::text AND deleted_at IS NULL
    AND (sqlc.narg(after_created_at)::timestamptz IS NULL
        OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: ScheduleListBasic :many
-- ScheduleList without the templates' documents' text and data: the
-- columns of schedules in their order, so a row converts to Schedule.
SELECT id, tenant, idem_key, fingerprint, name, cron, interval_ms, time_zone,
    (CASE WHEN job->'document' IS NULL THEN job
        ELSE jsonb_set(job, '{document}', (job->'document') - 'text' - 'data') END)::jsonb AS job,
    overlap, catchup, misfire_ms, paused, deleted_at, next_slot_at, last_job_id,
    buffered_slot_at, lease_owner, lease_until, created_at, updated_at
FROM schedules
WHERE tenant = @tenant::text AND deleted_at IS NULL
    AND (sqlc.narg(after_created_at)::timestamptz IS NULL
        OR (created_at, id) < (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: ScheduleSlotList :many
-- The latest decided slots of a schedule, newest first.
SELECT * FROM schedule_slots
WHERE schedule_id = @schedule_id::uuid
ORDER BY slot_at DESC
LIMIT @max::integer;

-- name: ScheduleSetPaused :one
-- Resuming moves the next slot to @next_slot_at (slots that passed while
-- paused never fire); pausing drops a buffered slot.
UPDATE schedules
SET next_slot_at = CASE WHEN paused AND NOT @paused::boolean THEN @next_slot_at::timestamptz ELSE next_slot_at END,
    buffered_slot_at = CASE WHEN @paused::boolean THEN NULL ELSE buffered_slot_at END,
    paused = @paused::boolean,
    updated_at = now()
WHERE tenant = @tenant::text AND id = @id::uuid AND deleted_at IS NULL
RETURNING *;

-- name: ScheduleDelete :execrows
UPDATE schedules SET deleted_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now()
WHERE tenant = @tenant::text AND id = @id::uuid AND deleted_at IS NULL;

-- name: ScheduleClaim :many
-- Takes the lease of due schedules that are free, expired or the owner's.
WITH due AS (
    SELECT id FROM schedules
    WHERE deleted_at IS NULL AND NOT paused
        AND (next_slot_at <= @now::timestamptz OR buffered_slot_at IS NOT NULL)
        AND (lease_until IS NULL OR lease_until < @now::timestamptz OR lease_owner = @owner::text)
    ORDER BY next_slot_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE schedules
SET lease_owner = @owner::text, lease_until = @lease_until::timestamptz
FROM due
WHERE schedules.id = due.id
RETURNING schedules.*;

-- name: ScheduleLock :one
-- Locks a schedule its owner still leases, live and unpaused.
SELECT * FROM schedules
WHERE id = @id::uuid AND lease_owner = @owner::text AND deleted_at IS NULL AND NOT paused
FOR UPDATE;

-- name: JobStatusGet :one
SELECT status FROM jobs WHERE id = @id::uuid;

-- name: ScheduleSlotInsert :one
-- Records a slot once; no row when it was decided before.
INSERT INTO schedule_slots (schedule_id, slot_at, tenant, outcome, job_id, reason)
VALUES (@schedule_id::uuid, @slot_at::timestamptz, @tenant::text, @outcome::text, sqlc.narg(job_id)::uuid, @reason::text)
ON CONFLICT DO NOTHING
RETURNING slot_at;

-- name: ScheduleSlotSettle :exec
-- Settles a recorded slot: the buffered one when it fires, or a fired one
-- with the job its key names.
UPDATE schedule_slots
SET outcome = @outcome::text, job_id = sqlc.narg(job_id)::uuid, reason = @reason::text, decided_at = now()
WHERE schedule_id = @schedule_id::uuid AND slot_at = @slot_at::timestamptz;

-- name: ScheduleAdvance :exec
-- Moves a schedule on; next_slot_at never goes back.
UPDATE schedules
SET next_slot_at = greatest(next_slot_at, @next_slot_at::timestamptz),
    last_job_id = coalesce(sqlc.narg(last_job_id)::uuid, last_job_id),
    buffered_slot_at = sqlc.narg(buffered_slot_at)::timestamptz,
    updated_at = now()
WHERE id = @id::uuid;
